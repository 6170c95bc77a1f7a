"""Numbers read from text: ASCII digits, everywhere alike (app/plain_numbers.py).

Python's int() and float() read "1_0" as 10, "٣" as 3 and float() "nan";
a setting, a query argument or a form's field that took them would act on a
number the operator never wrote.
"""
from __future__ import annotations

import math

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from app.config import ConfigError, load_settings
from app.plain_numbers import BEYOND_EVERY_BOUND, decimal_number, whole_number
from plugins.cooldowns.limits import parse_limit
from plugins.memory.settings import confidence_delta, hours
from tests.conftest import make_app

NOT_WHOLE = ["", " ", "1_0", "\u0663", "1\u0663", "\u00b2", "1.0", "1e3", "0x10", "--1", "+-1", "1 0", "1\n", "١٢"]


@pytest.mark.parametrize("text, value", [("0", 0), ("7", 7), ("-7", -7), ("+7", 7), ("007", 7), ("-0", 0),
                                         ("2147483647", 2**31 - 1), ("9" * 20, 10**20 - 1)])
def test_a_whole_number_is_ascii_digits_with_a_sign(text, value):
    assert whole_number(text) == value


@pytest.mark.parametrize("text", NOT_WHOLE)
def test_what_int_also_reads_is_no_whole_number(text):
    with pytest.raises(ValueError, match="must be a whole number"):
        whole_number(text)


def test_more_digits_than_any_bound_read_past_every_bound_on_their_side():
    assert whole_number("9" * 21) == BEYOND_EVERY_BOUND
    assert whole_number("-" + "9" * 5000) == -BEYOND_EVERY_BOUND   # int() refuses more than 4,300 digits
    assert whole_number("0" * 5000 + "12") == 12                     # leading zeros are no part of its size


@pytest.mark.parametrize("text, value", [("0.5", 0.5), (".5", 0.5), ("5.", 5.0), ("-1", -1.0), ("+0.25", 0.25),
                                         ("1e-3", 0.001), ("2E2", 200.0)])
def test_a_decimal_number_is_ascii_digits_a_point_and_an_exponent(text, value):
    assert decimal_number(text) == value


@pytest.mark.parametrize("text", ["", ".", "0_5", "nan", "NaN", "inf", "-infinity", "\u0660.5", "0.5\u0663",
                                  "1e", "e3", "0x1p3", " 0.5", "1,5"])
def test_what_float_also_reads_is_no_decimal_number(text):
    with pytest.raises(ValueError, match="must be a number"):
        decimal_number(text)


def test_a_decimal_too_large_for_a_float_is_infinite_for_its_bounds_to_refuse():
    assert math.isinf(decimal_number("1e999"))


@pytest.mark.parametrize("read, python", [(whole_number, int), (decimal_number, float)],
                         ids=["whole_number", "decimal_number"])
@given(text=st.text(max_size=30))
def test_a_number_read_is_what_python_reads_from_the_same_text(read, python, text):
    try:
        value = read(text)
    except ValueError:
        return
    assert text.isascii() and "_" not in text and text.strip() == text
    assert value == python(text)


@pytest.mark.parametrize("name, raw", [("CLAUDEOPS_INTERVAL", "1_0"), ("CLAUDEOPS_MAX_TIER", "\u0663"),
                                       ("CLAUDEOPS_LOG_RETENTION_DAYS", "1_000"),
                                       ("CLAUDEOPS_SESSION_MAX_COST_USD", "0_5"),
                                       ("CLAUDEOPS_DAILY_MAX_COST_USD", "nan")])
def test_a_setting_from_the_environment_in_other_digits_stops_the_service_naming_it(name, raw):
    with pytest.raises(ConfigError) as refused:
        load_settings({name: raw})
    assert str(refused.value).startswith(f"{name}={raw!r}: must be")


def test_spaces_around_a_setting_from_an_environment_file_are_no_part_of_it():
    values = load_settings({"CLAUDEOPS_INTERVAL": " 600 ", "CLAUDEOPS_SESSION_MAX_COST_USD": "2.50\t"})
    assert (values["CLAUDEOPS_INTERVAL"], values["CLAUDEOPS_SESSION_MAX_COST_USD"]) == (600, 2.5)


def test_the_memory_plugins_numbers_refuse_other_digits_too():
    for raw in ("1_0", "\u0663"):
        with pytest.raises(ValueError, match="must be a whole number"):
            hours(raw)
    for raw in ("0_5", "nan", "\u0660.5"):
        with pytest.raises(ValueError, match="must be a number"):
            confidence_delta(raw)
    assert (hours(" 48 "), confidence_delta("-0.25")) == (48, -0.25)


def test_a_limit_past_every_bound_is_refused_by_its_bound():
    with pytest.raises(ValueError, match="the count must be at most 2147483647"):
        parse_limit("9" * 5000 + "/4h")
    assert parse_limit("0" * 5000 + "3/2h").count == 3


def interval_of(client) -> str:
    return next(s for s in client.get("/api/v1/config").get_json()["settings"]
                if s["name"] == "CLAUDEOPS_INTERVAL")["value"]


@pytest.mark.parametrize("raw", ["1_0", "\u0663", "1.0", "9" * 5000])
def test_the_config_page_and_api_refuse_a_number_in_other_digits_and_keep_the_setting(client, raw):
    assert client.post("/config", data={"CLAUDEOPS_INTERVAL": raw}).status_code == 400
    assert client.put("/api/v1/config", json={"CLAUDEOPS_INTERVAL": raw}).status_code == 400
    assert interval_of(client) == "3600"
    assert client.post("/config", data={"CLAUDEOPS_INTERVAL": " 900 "}).status_code == 302
    assert interval_of(client) == "900"


def test_a_dashboard_filter_in_other_digits_is_ignored_and_said(client):
    page = client.get("/events?before=1_0")
    body = page.get_data(as_text=True)
    assert page.status_code == 200 and "before=&#39;1_0&#39;, which is not a number" in body


@pytest.mark.parametrize("given_id", ["1_2", "\u0661", "+1", "9" * 21, "#" + "9" * 5000])
def test_the_memories_command_takes_no_id_that_is_not_one(tmp_path, given_id):
    app = make_app(tmp_path)
    result = CliRunner().invoke(app.cli, ["memories", "delete", given_id])
    assert result.exit_code == 2, result.output
    assert "is not a memory id" in result.output and "Traceback" not in result.output

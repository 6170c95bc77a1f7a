"""The matcher's caches, bounded by the characters of what they keep."""
from __future__ import annotations

import threading

from plugins.memory import matcher, store
from plugins.memory.text_cache import ENTRY_CHARS, MATCHER_CACHE_CHARS, TextCache


def counting(work_out):
    calls = []

    def counted(text):
        calls.append(text)
        return work_out(text)
    return counted, calls


def test_the_texts_least_recently_asked_about_go_first_once_their_characters_are_over_the_bound():
    work_out, calls = counting(str.upper)
    cache = TextCache(work_out, max_chars=3 * (10 + ENTRY_CHARS))
    for text in ("a" * 10, "b" * 10, "c" * 10):
        assert cache(text) == text.upper()
    assert (len(cache), cache.chars) == (3, 3 * (10 + ENTRY_CHARS))
    assert cache("a" * 10) == "A" * 10 and len(calls) == 3   # kept: not worked out again, and now the newest
    cache("d" * 10)                                          # over the bound: "b", the oldest asked about, goes
    assert len(cache) == 3 and cache.chars == 3 * (10 + ENTRY_CHARS)
    cache("c" * 10)
    cache("a" * 10)
    assert len(calls) == 4
    cache("b" * 10)
    assert calls[-1] == "b" * 10 and len(calls) == 5


def test_a_long_text_takes_the_room_of_many_short_ones_and_one_over_the_bound_is_not_kept():
    work_out, calls = counting(len)
    cache = TextCache(work_out, max_chars=1000)
    for n in range(5):
        cache(f"short {n}")
    assert len(cache) == 5
    cache("x" * 800)               # 860 of 1,000: the three oldest short ones make way
    assert len(cache) == 3 and cache.chars == 860 + 2 * (len("short 4") + ENTRY_CHARS)
    assert cache("y" * 2000) == 2000 and cache("y" * 2000) == 2000
    assert calls.count("y" * 2000) == 2 and len(cache) == 3   # too long to keep: worked out each time
    cache("short 4")
    assert calls.count("short 4") == 1 and calls.count("short 0") == 1
    cache("short 0")
    assert calls.count("short 0") == 2
    cache.clear()
    assert (len(cache), cache.chars) == (0, 0)


def test_threads_asking_at_once_keep_the_count_true():
    cache = TextCache(len, max_chars=40 * (4 + ENTRY_CHARS))
    texts = [f"{n:04d}" for n in range(400)]

    def ask():
        for _ in range(20):
            for text in texts:
                assert cache(text) == 4
    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 40 and cache.chars == 40 * (4 + ENTRY_CHARS)


def test_the_matchers_caches_are_bounded_by_characters():
    """Long observations (up to CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS, 2,000)
    take as much room as many short ones: their count goes down, their
    memory does not go up."""
    matcher.features.clear()
    store.same_words.clear()
    long_ones = [f"observation {n} " + "backup takes long " * 110 for n in range(2_000)]
    for text in long_ones:
        matcher.features(text)
        store.same_words(text)
    for cache in (matcher.features, store.same_words):
        assert cache.chars <= MATCHER_CACHE_CHARS
        assert len(cache) == MATCHER_CACHE_CHARS // (len(long_ones[-1]) + ENTRY_CHARS)
    assert matcher.features(long_ones[-1]) == matcher._features(long_ones[-1])
    matcher.features.clear()
    store.same_words.clear()

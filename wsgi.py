"""What gunicorn serves. The scheduler is never started here: ``claudeops
serve`` runs exactly one, beside however many workers serve this app.

A worker refuses to start on a database at another schema than this
version's (a newer version migrated it, or the scheduler's host has not
yet): gunicorn then says so and exits, rather than serve pages that would
fail, or write rows they misread. So does a worker that cannot make the app
at all (a bad setting, a broken plugin, a state directory it cannot use):
in a line, as `claudeops serve` says it, not a traceback."""
import sys

from app import create_app
from app.config import ConfigError
from app.plugins import PluginError, how_to_start_without
from app.revisions import dashboard_refusal
from app.state_dir import CannotMake

# What a gunicorn worker exits with when it cannot boot: its master then
# stops ("Worker failed to boot") instead of starting it again and again.
WORKER_BOOT_ERROR = 3


def _refuse(refusal: str):
    print(f"claudeops dashboard: not serving: {refusal}", file=sys.stderr, flush=True)
    raise SystemExit(WORKER_BOOT_ERROR)


try:
    app = create_app()
except ConfigError as exc:
    _refuse(f"invalid configuration: {exc}")
except PluginError as exc:
    _refuse(how_to_start_without(str(exc)))
except CannotMake as exc:
    _refuse(str(exc))
refusal = dashboard_refusal(app)
if refusal is not None:
    _refuse(refusal)

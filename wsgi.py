"""What gunicorn serves. The scheduler is never started here: ``claudeops
serve`` runs exactly one, beside however many workers serve this app.

A worker refuses to start on a database at another schema than this
version's (a newer version migrated it, or the scheduler's host has not
yet): gunicorn then says so and exits, rather than serve pages that would
fail, or write rows they misread."""
import sys

from app import create_app
from app.revisions import dashboard_refusal

# What a gunicorn worker exits with when it cannot boot: its master then
# stops ("Worker failed to boot") instead of starting it again and again.
WORKER_BOOT_ERROR = 3

app = create_app()
refusal = dashboard_refusal(app)
if refusal is not None:
    print(f"claudeops dashboard: not serving: {refusal}", file=sys.stderr, flush=True)
    raise SystemExit(WORKER_BOOT_ERROR)

"""What gunicorn serves. The scheduler is never started here: ``claudeops
serve`` runs exactly one, beside however many workers serve this app."""
from app import create_app

app = create_app()

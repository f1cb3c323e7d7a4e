from sidecar.cli import app

app()

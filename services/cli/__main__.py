from services.cli.main import app

app()

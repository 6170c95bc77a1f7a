"""Built-in plugins; each uses only the public hooks in app.hookspecs."""

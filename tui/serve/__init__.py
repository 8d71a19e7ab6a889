"""`detektiv serve`: the app in a browser. `server` runs the web server (imported only by the
`serve` command); `driver` is the Textual driver each tab's app process runs with, and stays
light because every tab imports it."""

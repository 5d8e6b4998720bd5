"""`diskformer bench --browser chromium`: the engine's bench in a headless Chromium tab (lab code; nothing of it is
in the engine wheel). host.py serves the page through the product's own server with a bench-only mount, tab.py
drives Chromium through Playwright (run_tab.mjs) and compare.py sets the tab's figures beside Node's."""

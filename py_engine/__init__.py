"""diskformer engine: pure Python (no numpy), runs in Pyodide in a Web Worker and in CPython for tests."""
__version__ = "0.1.0"

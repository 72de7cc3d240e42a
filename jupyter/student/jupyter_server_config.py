"""Jupyter server settings of the course's JupyterLab (`make lab`; `make instructor` loads this file too).

JupyterLab and the Notebook 7 view ship the same font files (`1a10595a47bb3cf2.woff`, ...) in different static
folders, and jupyter_server 2.21's FileFindHandler caches a file it has found by its name alone: once JupyterLab
has served /static/lab/1a10595a47bb3cf2.woff, /static/notebook/1a10595a47bb3cf2.woff gets the Lab's path and a
403 ("is not in root static directory"), and the Notebook 7 view shows no icons. A cached path outside the
handler's own folders is looked up again (tests/test_browser.py opens both views in one browser).
"""

import os

from jupyter_server.base.handlers import FileFindHandler

c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file

_find = FileFindHandler.__dict__.get("get_absolute_path")
if isinstance(_find, classmethod) and isinstance(getattr(FileFindHandler, "_static_paths", None), dict):

    def _get_absolute_path(cls, roots, path):  # type: ignore[no-untyped-def]
        cached = cls._static_paths.get(path)
        if cached and not any((cached + os.sep).startswith(root) for root in roots):
            cls._static_paths.pop(path, None)  # found for another handler's folders: not this one's
        return _find.__func__(cls, roots, path)

    FileFindHandler.get_absolute_path = classmethod(_get_absolute_path)

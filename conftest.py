"""Skip the notebooks whose optional packages are not installed.

A notebook declares what it needs beyond requirements.txt in its metadata,
``"attnbook": {"requires": ["torch"]}``. When such a package cannot be imported,
every nbval cell of that notebook is marked skipped, with a reason naming the
package and the command that installs it (``pytest -rs`` prints it). The skip
mark is evaluated before nbval starts the notebook's kernel, so none is started.
"""

import pytest

from attnbook.nbtools import missing_requirements, skip_reason


def pytest_collection_modifyitems(config, items):
    verdicts = {}
    for item in items:
        path = getattr(item, "path", None)
        if path is None or path.suffix != ".ipynb":
            continue
        if path not in verdicts:
            missing = missing_requirements(path)
            verdicts[path] = skip_reason(missing) if missing else None
        if verdicts[path]:
            item.add_marker(pytest.mark.skip(reason=f"{path.name} {verdicts[path]}"))

"""An import-linter contract type of our own: no module imports another module's private (``_name``) names.

A helper two modules need is promoted (named without the underscore) or moved to where both belong. Imports inside
a package's own ``__init__`` of its submodules' names are allowed (that is how a package exposes them).
"""

from __future__ import annotations

import re

from importlinter import Contract, ContractCheck, fields, output

# "from x import a, _b as c" on one line, or the names of a parenthesised import as the import line shows them
_FROM_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+\(?(.*?)\)?\s*(?:#.*)?$")


class PrivateNamesContract(Contract):
    type_name = "private_names"

    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        roots = tuple(self.packages)  # type: ignore[arg-type]
        violations = []
        for importer in sorted(graph.modules):
            if not importer.startswith(roots):
                continue
            for imported in graph.find_modules_directly_imported_by(importer):
                if not imported.startswith(roots) or _same_package_init(importer, imported):
                    continue
                for detail in graph.get_import_details(importer=importer, imported=imported):
                    for name in _private_names(detail["line_contents"], imported):
                        violations.append((importer, detail["line_number"], imported, name))
        return ContractCheck(kept=not violations, metadata={"violations": sorted(set(violations))})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for importer, line, imported, name in check.metadata["violations"]:
            output.print_error(f"{importer}:{line} imports the private name {name} from {imported}")
            output.new_line()


def _private_names(line: str, imported: str) -> list[str]:
    match = _FROM_IMPORT.match(line)
    if not match:
        return []
    module, names = match.groups()
    if module != imported:  # "from pkg import module": the imported module is pkg.module, a module not a name
        return []
    out = []
    for part in names.split(","):
        name = part.strip().split(" as ")[0].strip()
        if name.startswith("_") and not name.startswith("__"):
            out.append(name)
    return out


def _same_package_init(importer: str, imported: str) -> bool:
    return imported.startswith(importer + ".")

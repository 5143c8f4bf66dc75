"""MkDocs hooks: pages that include tables generated from the code.

``<!-- generated: scheme-table -->`` in a page becomes the registry's table of what each
integrator steps (:func:`rtrigid.integrators.capability_table`), so the documentation cannot
disagree with what the Simulation accepts.
"""
from rtrigid import integrators

MARKERS = {
    "<!-- generated: scheme-table -->": lambda: integrators.capability_table("product"),
    "<!-- generated: paper-scheme-table -->": lambda: integrators.capability_table("paper"),
}


def on_page_markdown(markdown, page, config, files):
    for marker, table in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, table())
    return markdown

"""Reusable view pieces of the explorer. Every function that builds HTML escapes every piece of template or
model text with :func:`html.escape` (issue 6 part 5: text is shown as text, never interpreted)."""

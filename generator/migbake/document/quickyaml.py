"""PyYAML's implicit tag resolution as one quick method, for the safe loader and dumper that libyaml drives.

libyaml's composer (loading) and serializer (dumping) call back into Python for the tag of every node.
``BaseResolver.resolve`` also walks path resolvers (the safe classes have none) and concatenates its
candidate patterns on every call, which costs more than composing the node itself. The answers here
are the same: the implicit resolvers of the class, tried in their order, the first match winning.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml

STR_TAG, SEQ_TAG, MAP_TAG = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_Resolvers = list[tuple[str, re.Pattern[str]]]


class QuickResolve:
    """A mixin placed before a PyYAML loader or dumper class without path resolvers."""

    _by_first: ClassVar[dict[str, _Resolvers]] = {}
    _wildcard: ClassVar[_Resolvers] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "yaml_path_resolvers", None):
            raise TypeError(f"{cls.__name__}: QuickResolve does not implement path resolvers")
        table: dict[str | None, _Resolvers] = getattr(cls, "yaml_implicit_resolvers")  # noqa: B009
        cls._wildcard = list(table.get(None, []))
        cls._by_first = {first: list(found) + cls._wildcard for first, found in table.items() if first is not None}

    def descend_resolver(self, current_node: object, current_index: object) -> None:
        """Nothing to track: there are no path resolvers."""

    def ascend_resolver(self) -> None:
        """Nothing to track: there are no path resolvers."""

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        """The tag of a node: ``BaseResolver.resolve`` without path resolvers."""
        if kind is yaml.ScalarNode:
            if implicit[0]:
                for tag, regexp in self._by_first.get(value[:1], self._wildcard):
                    if regexp.match(value):
                        return tag
            return STR_TAG
        return SEQ_TAG if kind is yaml.SequenceNode else MAP_TAG

"""The one Jinja2 environment the targets render with, and ``Templates``: a shared context that renders files.

Templates hold loops and conditionals only; every value they print passes the guard of its template's
language (``guard``) on its way out. Output is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from functools import cache, lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.lexer
from jinja2.compiler import CodeGenerator
from markupsafe import Markup

from migbake.problems import RenderError
from migbake.render.artifact import Artifact
from migbake.render.guard import Block, Quoted, guard, html_comment, language
from migbake.render.quoting import comment_text, hcl_string, sh_quote, wrap_long, yaml_block, yaml_scalar
from migbake.resources import templates_dir

# per template, by kind (a value's class), the short texts it printed that passed the guard: a render prints
# some 600 values, 180 of them distinct, most of them again in the next profile's render. The guard's answer
# depends on the kind, the template's language and the text alone; a failing value is never kept.
_PASSED: dict[str | None, dict[type, set[str]]] = {}
_PASSED_TEXT_MAX, _PASSED_MAX = 512, 20_000  # a longer text is neither kept nor hashed
_passed_count = 0


def _finalizer(template: str | None) -> Callable[[Any], Any]:
    """The finalizer of ``template``: values it printed before pass, others go through the guard (``_guarded``); it
    returns a str (the value, or its text), which the template prints as it is (``_GuardedCode``)."""
    passed = _PASSED.setdefault(template, {})

    def finalize(value: Any) -> Any:
        seen = passed.get(value.__class__)
        if seen is not None and len(value) <= _PASSED_TEXT_MAX and value in seen:
            return value
        return _guarded(template, value, passed)

    return finalize


class _GuardedCode(CodeGenerator):
    """Jinja's code generator, every printed value of a named template handed to that template's finalizer
    (``environment.finalizers[NAME](value)``: the guard of its language) instead of the environment's
    ``finalize`` with the render's context, which a template without a name still gets (``_finalize``)."""

    def _make_finalize(self) -> Any:
        if self._finalize is None and self.name is not None:
            self.environment.finalizer(self.name)  # type: ignore[attr-defined]  # made now, looked up at render
            self._finalize = self._FinalizeInfo(None, f"environment.finalizers[{self.name!r}](")
        return super()._make_finalize()

    # A named template's finalizer returns a str (``_finalizer``), so its output is not wrapped in Jinja's ``str(...)``
    # as well, which copies a str subclass whole (a Block of the role's group data: 100 KiB): the way Jinja's own
    # NativeCodeGenerator leaves it out (pallets/jinja:src/jinja2/nativetypes.py@3.1.6).

    def _output_child_pre(self, node: Any, frame: Any, finalize: Any) -> None:
        if self.name is None or frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super()._output_child_pre(node, frame, finalize)
        else:
            self.write(finalize.src)

    def _output_child_post(self, node: Any, frame: Any, finalize: Any) -> None:
        if self.name is None or frame.eval_ctx.volatile or frame.eval_ctx.autoescape:
            super()._output_child_post(node, frame, finalize)
        else:
            self.write(")")


@jinja2.pass_context
def _finalize(context: jinja2.runtime.Context, value: Any) -> Any:
    """The finalizer of a template made from a string (no name when compiled: ``_GuardedCode``)."""
    return environment().finalizer(context.name)(value)  # type: ignore[attr-defined]


def _guarded(template: str | None, value: Any, passed: dict[type, set[str]]) -> str:
    """``value`` through the guard of ``template``'s language, remembered in ``passed`` (the template's, by
    kind) when it is a short text; its text (``value`` itself when it is a str)."""
    global _passed_count
    kind = value.__class__
    if kind is jinja2.Undefined:  # ``{{ x if c }}`` when not c: prints nothing
        return str(value)
    guard(value, _language(template), template)
    if not isinstance(value, str):  # a number, a boolean
        return str(value)
    if kind in _TEXTS and len(value) <= _PASSED_TEXT_MAX:
        if _passed_count >= _PASSED_MAX:
            for kept in _PASSED.values():
                kept.clear()
            _passed_count = 0
        passed.setdefault(kind, set()).add(value)
        _passed_count += 1
    return value


_language = cache(language)
_TEXTS = frozenset((str, Quoted, Block, Markup))  # the texts remembered


class _Environment(jinja2.Environment):
    """Templates whose globals are a plain dict: every render copies them into its context.

    Jinja's default, a ChainMap over the environment's globals (so that later changes to those show),
    costs more to copy than rendering most of our templates; ours never change after start-up. A template's
    printed values go to its own finalizer (``_GuardedCode``, ``finalizers``).
    """

    code_generator_class = _GuardedCode

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.finalizers: dict[str | None, Callable[[Any], Any]] = {}  # by template name (``_GuardedCode``)
        self._loaded: dict[str, jinja2.Template] = {}  # by name (``get_template``)

    def get_template(self, name: str | jinja2.Template, parent: str | None = None,
                     globals: MutableMapping[str, Any] | None = None) -> jinja2.Template:
        """``name``'s template, looked up once: templates never change while migbake runs (``auto_reload`` off),
        and an ``{% include %}`` asks at every render (some twenty a profile), where Jinja's own look-up takes
        its cache's lock and moves the name to the front of its queue. ``join_path`` is Jinja's: a name is the
        same whoever includes it."""
        if globals is not None or type(name) is not str:
            return super().get_template(name, parent, globals)
        made = self._loaded.get(name)
        if made is None:
            made = self._loaded[name] = super().get_template(name, parent)
        return made

    def finalizer(self, template: str | None) -> Callable[[Any], Any]:
        """The finalizer of ``template`` (made on first asking)."""
        made = self.finalizers.get(template)
        if made is None:
            made = self.finalizers[template] = _finalizer(template)
        return made

    def make_globals(self, d: MutableMapping[str, Any] | None) -> MutableMapping[str, Any]:
        return {**self.globals, **(d or {})}

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``obj.attribute`` as Jinja reads it (``Environment.getattr``: an attribute, else an item, else undefined),
        a plain dict's item looked up first where a dict has no attribute of that name: Jinja's order raises
        and catches an AttributeError for each (a hundred a render)."""
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        try:
            return getattr(obj, attribute)
        except AttributeError:
            pass
        try:
            return obj[attribute]
        except (TypeError, LookupError, AttributeError):
            return self.undefined(obj=obj, name=attribute)


_DICT_ATTRIBUTES = frozenset(dir(dict))  # what getattr finds on a plain dict (it has no attributes of its own)


# Ansible's own Jinja2 delimiters, which the Ansible templates print around the expressions Ansible evaluates
ANSIBLE_DELIMITERS = {"ansible_open": Quoted("{{"), "ansible_close": Quoted("}}")}


class _AnsibleDelimiters(jinja2.ext.Extension):
    """``{{ ansible_open }}`` and ``{{ ansible_close }}`` alone become the template's text ``{{`` and ``}}`` when it
    is compiled: the same output, without a value printed (and guarded) at every render, a third of a render's
    values. Any other use of the two names reads the globals."""

    def filter_stream(self, stream: jinja2.lexer.TokenStream) -> Iterator[jinja2.lexer.Token]:
        while not stream.eos:
            token = next(stream)
            name = stream.current
            if (token.type == "variable_begin" and name.type == "name" and name.value in ANSIBLE_DELIMITERS
                    and stream.look().type == "variable_end"):
                next(stream)
                next(stream)
                yield jinja2.lexer.Token(token.lineno, "data", str(ANSIBLE_DELIMITERS[name.value]))
            else:
                yield token


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The environment (one per process: it caches compiled templates, which is most of a render's cost)."""
    env = _Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=False,  # templates do not change while migbake runs: no stat() per render
        finalize=_finalize,  # every printed value passes the guard of its template's language
        extensions=[_AnsibleDelimiters],
    )
    env.filters["sh"] = sh_quote
    env.filters["hcl"] = hcl_string
    env.filters["yaml"] = yaml_scalar
    env.filters["comment"] = comment_text
    env.filters["html_comment"] = html_comment
    env.filters["yaml_block"] = yaml_block
    env.filters["wrap_long"] = wrap_long
    # Ansible's own Jinja2 delimiters, for the Ansible templates that name Ansible's variables
    env.globals.update(ANSIBLE_DELIMITERS)
    return env


def _render(env: jinja2.Environment, template: jinja2.Template, variables: dict[str, Any]) -> str:
    """``template.render(variables)`` for ``variables`` that already hold the globals, without copying them.

    Template.render copies its arguments, then those and the globals into a new context, twice a
    dict of some forty entries for each of the fifteen files of a profile. (Jinja2 3.1 joins the parts
    with ``env.concat``, which 3.0 does not have; for a text environment it is ``"".join``.)
    """
    try:
        return "".join(template.root_render_func(template.new_context(variables, shared=True)))
    except Exception:
        env.handle_exception()


class Templates:
    """Renders the templates of one output tree, each with the variables every target shares (and its own)."""

    def __init__(self, variables: dict[str, Any]) -> None:
        self._env = environment()
        self._shared = {**self._env.globals, **variables}  # what Template.render would copy into each context

    def with_variables(self, extra: dict[str, Any]) -> Templates:
        """These templates with ``extra`` beside the shared variables (for several files of one context: the
        variables are merged once, not at each file)."""
        return Templates({**self._shared, **extra})

    def text(self, template: str, extra: dict[str, Any] | None = None) -> str:
        """``template`` rendered (a RenderError names the template when it fails)."""
        try:
            return _render(self._env, self._env.get_template(template),
                           {**self._shared, **extra} if extra else self._shared)
        except jinja2.TemplateError as e:
            raise RenderError(f"template {template}: {e}") from e

    def file(self, template: str, path: str, mode: int, extra: dict[str, Any] | None = None) -> Artifact:
        """``template`` rendered as the file ``path`` of OUT."""
        return Artifact(path, self.text(template, extra), mode)

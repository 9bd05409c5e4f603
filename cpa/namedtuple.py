"""``class X(NamedTuple)`` as :class:`typing.NamedTuple` writes it, for a third of its cost.

Why: the daemon's first write waits on the CPU that creates its record classes, and
``typing.NamedTuple`` checks every field's annotation when the class is created (with
``from __future__ import annotations`` each is a string, compiled into a ``ForwardRef``):
~260 us a class against ~80 us for the :func:`collections.namedtuple` underneath it, on
this project's ~45 record classes on the way to the first write (``python -X importtime``).
Nothing at run time reads those checked annotations; a type checker reads the source.

So type checkers see :class:`typing.NamedTuple` itself, and the interpreter this module's
class statement hook, which builds the same class as typing does (what
``collections.namedtuple`` builds, without compiling a ``__new__`` from source for each
class: see :func:`_namedtuple`; its defaults, methods, docstring and ``Generic`` parameters;
the same errors for a field without a default after one with, and for an overwritten
namedtuple attribute), with the annotations kept as written: ``typing.get_type_hints``
resolves them as it does any class's. Only the class statement form is provided (the
functional form, ``NamedTuple("X", [...])``, is typing's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["NamedTuple"]

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    import sys
    import types
    from typing import Generic

    # typing's own sets: what a class body may not define, and what it may without it
    # becoming an attribute of the class.
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _Meta(type):
        def __new__(cls, typename, bases, ns):
            for base in bases:
                if base is not _Base and base is not Generic:
                    raise TypeError("can only inherit from a NamedTuple type and Generic")
            bases = tuple(tuple if base is _Base else base for base in bases)
            types = ns.get("__annotations__", {})
            default_names = []
            for field_name in types:
                if field_name in ns:
                    default_names.append(field_name)
                elif default_names:
                    raise TypeError(f"Non-default namedtuple field {field_name} "
                                    f"cannot follow default field"
                                    f"{'s' if len(default_names) > 1 else ''} "
                                    f"{', '.join(default_names)}")
            made = _namedtuple(typename, tuple(types), tuple(ns[n] for n in default_names),
                               ns["__module__"])
            made.__annotations__ = made.__new__.__annotations__ = dict(types)
            made.__bases__ = bases
            if Generic in bases:
                made.__class_getitem__ = classmethod(Generic.__class_getitem__.__func__)
            for key in ns:
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in made._fields:
                    setattr(made, key, ns[key])
            if Generic in bases:
                made.__init_subclass__()
            return made

    _Base = type.__new__(_Meta, "NamedTuple", (), {})

    try:
        from _collections import _tuplegetter
    except ImportError:  # as collections does without its C part
        from operator import itemgetter

        def _tuplegetter(index, doc):
            return property(itemgetter(index), doc=doc)

    _NEW_CODE = {}  # arity -> the code of collections.namedtuple's __new__, field names _0..

    def _namedtuple(typename, field_names, defaults, module):
        """``collections.namedtuple(typename, field_names, defaults=defaults,
        module=module)`` (CPython 3.11's, step by step), except that its ``__new__`` is not
        compiled from source for each class: the code compiled once for a number of fields
        is given the field names (its arguments' names: keyword calls and signatures are the
        same). The compiling was half of a class's ~62 us in the image's interpreter. The
        other methods are defined here, so their ``__module__`` is this module's."""
        for name in field_names:
            if name.startswith("_"):
                raise ValueError(f"Field names cannot start with an underscore: {name!r}")
        field_names = tuple(map(sys.intern, field_names))
        num_fields = len(field_names)
        arg_list = ", ".join(field_names)
        if num_fields == 1:
            arg_list += ","
        repr_fmt = "(" + ", ".join(f"{name}=%r" for name in field_names) + ")"
        tuple_new = tuple.__new__
        _dict, _tuple, _len, _map, _zip = dict, tuple, len, map, zip
        namespace = {"_tuple_new": tuple_new, "__builtins__": {},
                     "__name__": f"namedtuple_{typename}"}
        code = _NEW_CODE.get(num_fields)
        if code is None:
            numbered = ", ".join(f"_{i}" for i in range(num_fields))
            if num_fields == 1:
                numbered += ","
            code = _NEW_CODE[num_fields] = eval(  # our own fixed text
                f"lambda _cls, {numbered}: _tuple_new(_cls, ({numbered}))", namespace).__code__
        __new__ = types.FunctionType(
            code.replace(co_varnames=("_cls", *field_names), co_name="__new__",
                         co_qualname="<lambda>"),
            namespace, "<lambda>")
        __new__.__name__ = "__new__"
        __new__.__defaults__ = defaults
        __new__.__doc__ = f"Create new instance of {typename}({arg_list})"

        @classmethod
        def _make(cls, iterable):
            result = tuple_new(cls, iterable)
            if _len(result) != num_fields:
                raise TypeError(f"Expected {num_fields} arguments, got {len(result)}")
            return result

        _make.__func__.__doc__ = f"Make a new {typename} object from a sequence or iterable"

        def _replace(self, /, **kwds):
            result = self._make(_map(kwds.pop, field_names, self))
            if kwds:
                raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
            return result

        _replace.__doc__ = (f"Return a new {typename} object replacing specified fields "
                            "with new values")

        def __repr__(self):
            "Return a nicely formatted representation string"
            return self.__class__.__name__ + repr_fmt % self

        def _asdict(self):
            "Return a new dict which maps field names to their values."
            return _dict(_zip(self._fields, self))

        def __getnewargs__(self):
            "Return self as a plain tuple.  Used by copy and pickle."
            return _tuple(self)

        for method in (__new__, _make.__func__, _replace, __repr__, _asdict, __getnewargs__):
            method.__qualname__ = f"{typename}.{method.__name__}"
        field_defaults = dict(reversed(list(zip(reversed(field_names), reversed(defaults),
                                                strict=False))))
        class_namespace = {
            "__doc__": f"{typename}({arg_list})",
            "__slots__": (),
            "_fields": field_names,
            "_field_defaults": field_defaults,
            "__new__": __new__,
            "_make": _make,
            "_replace": _replace,
            "__repr__": __repr__,
            "_asdict": _asdict,
            "__getnewargs__": __getnewargs__,
            "__match_args__": field_names,
        }
        for index, name in enumerate(field_names):
            doc = sys.intern(f"Alias for field number {index}")
            class_namespace[name] = _tuplegetter(index, doc)
        result = type(typename, (tuple,), class_namespace)
        result.__module__ = module
        return result

    def NamedTuple(typename, fields=None, /, **kwargs):
        raise TypeError("cpa.namedtuple.NamedTuple is for class statements; "
                        "use typing.NamedTuple for the functional form")

    NamedTuple.__mro_entries__ = lambda bases: (_Base,)

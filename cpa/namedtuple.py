"""``class X(NamedTuple)`` as :class:`typing.NamedTuple` writes it, for a third of its cost.

Why: the daemon's first write waits on the CPU that creates its record classes, and
``typing.NamedTuple`` checks every field's annotation when the class is created (with
``from __future__ import annotations`` each is a string, compiled into a ``ForwardRef``):
~260 us a class against ~80 us for the :func:`collections.namedtuple` underneath it, on
this project's ~45 record classes on the way to the first write (``python -X importtime``).
Nothing at run time reads those checked annotations; a type checker reads the source.

So type checkers see :class:`typing.NamedTuple` itself, and the interpreter this module's
class statement hook, which builds the same class as typing does (the same
``collections.namedtuple``, its defaults, methods, docstring and ``Generic`` parameters;
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
    import collections
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
            made = collections.namedtuple(typename, list(types),
                                          defaults=[ns[n] for n in default_names],
                                          module=ns["__module__"])
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

    def NamedTuple(typename, fields=None, /, **kwargs):
        raise TypeError("cpa.namedtuple.NamedTuple is for class statements; "
                        "use typing.NamedTuple for the functional form")

    NamedTuple.__mro_entries__ = lambda bases: (_Base,)

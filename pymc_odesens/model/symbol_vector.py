"""Symbolic state and parameter vectors handed to a user's right-hand side."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import sympy as sp

__all__ = ["SymbolVector", "UnknownNameError", "make_symbols"]


class UnknownNameError(KeyError):
    """A state or parameter name that the system does not declare."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def make_symbols(names: Sequence[str]) -> tuple[sp.Symbol, ...]:
    """Real sympy symbols, one per name, in order."""
    return tuple(sp.Symbol(name, real=True) for name in names)


class SymbolVector(Sequence):
    """A fixed-length vector of sympy symbols, indexable by position and by name.

    Parameters
    ----------
    role : str
        ``"y"`` or ``"p"``; used in error messages.
    names : sequence of str, optional
        Names of the entries. Without names (and with ``growable=True``) the
        vector grows as it is indexed, so the length can be inferred by tracing.
    symbols : sequence of sympy.Symbol
        The symbols, one per name.
    growable : bool
        Allow positions past the current end (used while tracing without a
        declared length).
    """

    def __init__(
        self,
        role: str,
        names: Sequence[str],
        symbols: Sequence[sp.Symbol],
        *,
        growable: bool = False,
    ) -> None:
        self._role = role
        self._names = list(names)
        self._symbols = list(symbols)
        self._index = {name: i for i, name in enumerate(self._names)}
        self._growable = growable

    # Sequence protocol -------------------------------------------------------
    def __len__(self) -> int:
        return len(self._symbols)

    def __iter__(self) -> Iterator[sp.Symbol]:
        return iter(self._symbols)

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                return self._symbols[self._index[key]]
            except KeyError:
                known = ", ".join(self._names) or "(none named)"
                raise UnknownNameError(
                    f"{self._role}[{key!r}]: no entry named {key!r}; the names are {known}"
                ) from None
        if isinstance(key, slice):
            return [self[i] for i in range(*key.indices(len(self)))]
        if not isinstance(key, (int,)) and not hasattr(key, "__index__"):
            raise TypeError(
                f"{self._role}[{key!r}]: index must be an int or a name (str), "
                f"got {type(key).__name__}"
            )
        i = int(key)
        if i < 0:
            i += len(self)
        if i >= len(self) and self._growable:
            while len(self._symbols) <= i:
                j = len(self._symbols)
                name = f"{self._role}{j}"
                self._names.append(name)
                self._symbols.append(sp.Symbol(name, real=True))
                self._index[name] = j
        if not 0 <= i < len(self):
            raise IndexError(
                f"{self._role}[{int(key)}] is out of range: {self._role} has {len(self)} entries"
            )
        return self._symbols[i]

    def __getattr__(self, name: str):
        # Allow y.prey as well as y["prey"]; never shadow private attributes.
        if name.startswith("_"):
            raise AttributeError(name)
        index = self.__dict__.get("_index", {})
        if name in index:
            return self._symbols[index[name]]
        raise AttributeError(f"{self._role} has no entry named {name!r}")

    @property
    def names(self) -> list[str]:
        """Names of the entries, in index order."""
        return list(self._names)

    @property
    def symbols(self) -> tuple[sp.Symbol, ...]:
        """The sympy symbols, in index order."""
        return tuple(self._symbols)

    def __repr__(self) -> str:
        return f"SymbolVector({self._role}: {', '.join(self._names)})"

"""Translate generated kernel source (a small subset of Python) into LLVM IR.

Every code generator of this package writes its kernels as Python functions of the
shared signature ``def kernel(t, y, p, v, out)`` (:mod:`pymc_odesens.codegen.signature`),
in the subset below; this module turns one such function into the text of an LLVM
module, which :mod:`pymc_odesens.codegen.machine_code` compiles to machine code. numba
is not involved: typing and lowering flat generated code through numba cost seconds
for a small model and minutes (or all the memory) for a pathway model, while the
translation here is linear in the size of the source and LLVM gets code it compiles in
about linear time.

The kernel language
-------------------
Arguments: the first is a float64 (time), the other four are pointers to float64.
Values are float64, int64 or booleans; a name's type is that of its first assignment.

- statements: ``name = expr``, ``pointer[index] = expr``, ``+=`` / ``-=`` / ``*=`` on
  either, ``if``/``elif``/``else``, ``for name in range(start, stop[, step])`` (constant
  step), ``return`` (no value), ``pass``;
- expressions: float and int literals, ``True``/``False``, names, ``pointer[index]``,
  ``+ - * / ** %``, unary ``-``, comparisons (also chained; two conditions compare with
  ``==`` / ``!=``, the latter an exclusive or), ``and``/``or``/``not`` (both sides are
  evaluated: they are pure), ``a if c else b`` (a ``select``: both branches are evaluated
  and one is kept), ``abs``, ``min``, ``max``, ``int`` (truncation),
  ``float``, the functions of Python's ``math`` module that sympy's printer emits, and
  ``math.pi``, ``math.e``, ``math.inf``;
- builtins of the language: ``pointer_offset(pointer, k)`` (the pointer ``k`` float64s
  further on) and ``trajectory_state(buffer, t, k)`` (interpolates the recorded trajectory
  of a trajectory buffer at ``t`` into the buffer's scratch area, which starts ``k``
  float64s into it, and is a pointer to that state; see
  :mod:`pymc_odesens.codegen.recorded_trajectory`, called through the external symbol
  :data:`TRAJECTORY_STATE_SYMBOL`).

Anything else is refused with :class:`KernelSourceError` naming the line. Floating-point
operations are emitted in the order Python (and numba) would evaluate the source, with no
fast-math flags: the machine code computes bit for bit what the Python source says.

Size
----
A long function is cut into internal functions of at most :data:`CHUNK_OPERATIONS`
operations (straight-line runs of statements, and subexpressions larger than
:data:`EXPRESSION_OPERATIONS` become temporaries first): LLVM's code generation is
superlinear in the size of one function (measured: 50000 statements in one function
took 97 to 137 s, in chunks of 200 statements 11 s). Names used by more than one chunk
live in stack arrays of the kernel (``scratch``); the others are SSA values.
"""

from __future__ import annotations

import ast
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "CHUNK_OPERATIONS",
    "EXPRESSION_OPERATIONS",
    "KernelSourceError",
    "TRAJECTORY_STATE_SYMBOL",
    "function_definitions",
    "kernel_ir",
]

CHUNK_OPERATIONS = 1200
"""Largest number of operations (AST nodes) of straight-line code in one LLVM function."""

EXPRESSION_OPERATIONS = 400
"""Subexpressions larger than this become temporaries (so that chunks can be cut)."""

TRAJECTORY_STATE_SYMBOL = "pymc_odesens_trajectory_state"
"""External C function ``void (double* buffer, double t)`` behind ``trajectory_state``."""

_F, _I, _B, _P = "double", "i64", "i1", "ptr"

_INTRINSIC_1 = {
    "exp": "llvm.exp.f64",
    "log": "llvm.log.f64",
    "log10": "llvm.log10.f64",
    "log2": "llvm.log2.f64",
    "sin": "llvm.sin.f64",
    "cos": "llvm.cos.f64",
    "fabs": "llvm.fabs.f64",
    "floor": "llvm.floor.f64",
    "ceil": "llvm.ceil.f64",
    "trunc": "llvm.trunc.f64",
}
_EXTERN_1 = {
    name: name
    for name in (
        "sqrt",
        "tan",
        "asin",
        "acos",
        "atan",
        "asinh",
        "acosh",
        "atanh",
        "sinh",
        "cosh",
        "tanh",
        "log1p",
        "expm1",
        "erf",
        "erfc",
        "lgamma",
    )
}
_EXTERN_1["gamma"] = "tgamma"
_EXTERN_2 = {"atan2": "atan2", "hypot": "hypot", "fmod": "fmod"}
_INTRINSIC_2 = {"pow": "llvm.pow.f64", "copysign": "llvm.copysign.f64"}
_CONSTANTS = {"pi": 3.141592653589793, "e": 2.718281828459045, "inf": float("inf")}
_FLOAT_CMP = {
    ast.Lt: "olt",
    ast.LtE: "ole",
    ast.Gt: "ogt",
    ast.GtE: "oge",
    ast.Eq: "oeq",
    ast.NotEq: "une",
}
_INT_CMP = {
    ast.Lt: "slt",
    ast.LtE: "sle",
    ast.Gt: "sgt",
    ast.GtE: "sge",
    ast.Eq: "eq",
    ast.NotEq: "ne",
}
_FLOAT_OP = {ast.Add: "fadd", ast.Sub: "fsub", ast.Mult: "fmul", ast.Div: "fdiv"}
_INT_OP = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul"}


class KernelSourceError(ValueError):
    """Generated kernel source uses a construct the kernel language does not have."""


def _refuse(node: ast.AST, what: str) -> KernelSourceError:
    line = getattr(node, "lineno", "?")
    return KernelSourceError(f"kernel source line {line}: {what} ({ast.unparse(node)[:80]!r})")


def function_definitions(source: str) -> dict[str, ast.FunctionDef]:
    """The top-level function definitions of a generated module, by name.

    Everything else at module level (docstring, comments, imports, constants,
    decorators) is ignored.
    """
    tree = ast.parse(source)
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


# ----------------------------------------------------------------------------- helpers


def _float_literal(value: float) -> str:
    bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
    return f"0x{bits:016X}"


def _size(node: ast.AST) -> int:
    return sum(1 for _ in ast.walk(node))


def _is_simple(statement: ast.stmt) -> bool:
    return isinstance(statement, (ast.Assign, ast.AugAssign, ast.Pass, ast.Expr))


@dataclass
class _Chunk(ast.stmt):
    """A call of the internal function ``index`` holding a run of simple statements."""

    index: int = 0
    body: list = field(default_factory=list)
    _fields = ()


class _Temporaries:
    def __init__(self) -> None:
        self.count = 0

    def name(self) -> str:
        self.count += 1
        return f"__h{self.count}"


def _children(node: ast.expr) -> list[tuple[str, int | None]]:
    """(field, position) of each sub-expression that may become a temporary."""
    out = []
    for name, value in ast.iter_fields(node):
        if isinstance(node, ast.Call) and name == "func":
            continue
        if isinstance(value, ast.expr) and not isinstance(value, ast.expr_context):
            out.append((name, None))
        elif isinstance(value, list):
            out += [(name, k) for k, v in enumerate(value) if isinstance(v, ast.expr)]
    return out


def _get(node, name, k):
    value = getattr(node, name)
    return value if k is None else value[k]


def _put(node, name, k, new) -> None:
    if k is None:
        setattr(node, name, new)
    else:
        getattr(node, name)[k] = new


def _measure(node: ast.AST, sizes: dict) -> int:
    """``_size(node)``, remembered in ``sizes`` for the node and its descendants (which
    ``_hoist`` asks for again at every level of a deep expression)."""
    # post-order without recursion: a long sum nests as deep as its terms are many
    stack = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        if id(current) in sizes:
            continue
        if children_done:
            size = 1 + sum(sizes[id(c)][1] for c in ast.iter_child_nodes(current))
            sizes[id(current)] = (current, size)  # the node kept: its id stays its own
            continue
        stack.append((current, True))
        stack.extend((c, False) for c in ast.iter_child_nodes(current) if id(c) not in sizes)
    return sizes[id(node)][1]


# a temporary's name that replaces a hoisted sub-expression: Name and its Load context
_NAME_SIZE = 2


def _hoist(expr: ast.expr, before: list, temps: _Temporaries, sizes: dict) -> ast.expr:
    """``expr`` with subexpressions moved into temporaries until it is small enough
    (``sizes``: the nodes' sizes, kept up to date as children are replaced)."""
    if _measure(expr, sizes) <= EXPRESSION_OPERATIONS or isinstance(
        expr, (ast.Name, ast.Constant, ast.Attribute)
    ):
        return expr
    if isinstance(expr, ast.Subscript) or (
        isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "range"
    ):
        return expr
    for name, k in _children(expr):
        _put(expr, name, k, _hoist(_get(expr, name, k), before, temps, sizes))
    size = 1 + sum(_measure(c, sizes) for c in ast.iter_child_nodes(expr))
    parts = sorted(_children(expr), key=lambda c: -_measure(_get(expr, *c), sizes))
    for name, k in parts:
        if size <= EXPRESSION_OPERATIONS:
            break
        child = _get(expr, name, k)
        if isinstance(child, (ast.Name, ast.Constant)):
            continue
        temp = temps.name()
        before.append(ast.Assign(targets=[ast.Name(temp, ast.Store())], value=child, lineno=0))
        _put(expr, name, k, ast.Name(temp, ast.Load()))
        size -= _measure(child, sizes) - _NAME_SIZE
    sizes[id(expr)] = (expr, size)
    return expr


def _split_expressions(body: list, temps: _Temporaries) -> list:
    """Statements of ``body`` (recursively) with oversized expressions split."""
    out = []
    for statement in body:
        if isinstance(statement, (ast.Assign, ast.AugAssign)):
            before: list = []
            statement.value = _hoist(statement.value, before, temps, {})
            for s in before:
                s.lineno = getattr(statement, "lineno", 0)
            out += before
            out.append(statement)
        elif isinstance(statement, ast.If):
            statement.body = _split_expressions(statement.body, temps)
            statement.orelse = _split_expressions(statement.orelse, temps)
            out.append(statement)
        elif isinstance(statement, ast.For):
            statement.body = _split_expressions(statement.body, temps)
            out.append(statement)
        else:
            out.append(statement)
    return out


def _partition(body: list, chunks: list, chunk_all: bool) -> list:
    """Cut runs of simple statements into chunks (appended to ``chunks``)."""
    out: list = []
    run: list = []
    size = 0

    def flush(final: bool) -> None:
        nonlocal run, size
        if run and chunk_all and (size >= CHUNK_OPERATIONS // 8 or not final):
            chunks.append(run)
            out.append(_Chunk(index=len(chunks) - 1, body=run))
        else:
            out.extend(run)
        run, size = [], 0

    for statement in body:
        if _is_simple(statement):
            run.append(statement)
            size += _size(statement)
            if size >= CHUNK_OPERATIONS:
                flush(False)
            continue
        flush(True)
        if isinstance(statement, ast.If):
            statement.body = _partition(statement.body, chunks, chunk_all)
            statement.orelse = _partition(statement.orelse, chunks, chunk_all)
        elif isinstance(statement, ast.For):
            statement.body = _partition(statement.body, chunks, chunk_all)
        out.append(statement)
    flush(True)
    return out


# ----------------------------------------------------------------------------- analysis


@dataclass
class _Variable:
    name: str
    type: str | None = None
    assignments: int = 0
    units: set = field(default_factory=set)
    blocks: list = field(default_factory=list)  # (unit, block path) of every reference
    definition: tuple | None = None  # (unit, block path) of the first assignment
    nested_assignment: bool = False
    storage: str = "ssa"  # ssa | stack | scratch | argument
    slot: int = -1


class _Analysis(ast.NodeVisitor):
    """Names, their types and where they are used; which pointers are written."""

    def __init__(self, arguments: list[str]) -> None:
        self.variables: dict[str, _Variable] = {}
        self.written_pointers: set[str] = set()
        self.arguments = arguments
        self.unit = 0
        self.path: tuple = (0,)
        self._blocks = 0
        for k, name in enumerate(arguments):
            var = self._var(name)
            var.type = _F if k == 0 else _P
            var.storage = "argument"

    def _var(self, name: str) -> _Variable:
        var = self.variables.get(name)
        if var is None:
            var = self.variables[name] = _Variable(name)
        return var

    def _new_block(self) -> tuple:
        self._blocks += 1
        return (*self.path, self._blocks)

    def body(self, statements: list) -> None:
        for s in statements:
            self.statement(s)

    def nested(self, statements: list) -> None:
        saved = self.path
        self.path = self._new_block()
        self.body(statements)
        self.path = saved

    def reference(self, name: str) -> _Variable:
        var = self.variables.get(name)
        if var is None:
            raise KernelSourceError(f"kernel source: {name!r} is read before any assignment")
        var.units.add(self.unit)
        var.blocks.append((self.unit, self.path))
        return var

    def assign(self, name: str, type_: str, node: ast.AST) -> None:
        var = self._var(name)
        if var.type is None:
            var.type = type_
        elif var.type != type_ and not (var.type == _F and type_ in (_I, _B)):
            raise _refuse(node, f"{name!r} was a {var.type} and is assigned a {type_}")
        var.assignments += 1
        var.units.add(self.unit)
        var.blocks.append((self.unit, self.path))
        if var.definition is None:
            var.definition = (self.unit, self.path)
        if len(self.path) > 1:
            var.nested_assignment = True

    def statement(self, s: ast.stmt) -> None:
        if isinstance(s, _Chunk):
            saved_unit, saved_path = self.unit, self.path
            self.unit, self.path = s.index + 1, (0,)
            self.body(s.body)
            self.unit, self.path = saved_unit, saved_path
        elif isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                raise _refuse(s, "one assignment target at a time")
            type_ = self.expression(s.value)
            self.target(s.targets[0], type_, s)
        elif isinstance(s, ast.AugAssign):
            type_ = self.expression(s.value)
            if isinstance(s.target, ast.Name):
                self.reference(s.target.id)
                var = self.variables[s.target.id]
                self.assign(s.target.id, _F if _F in (var.type, type_) else var.type, s)
            else:
                self.expression(s.target.value)
                self.expression(s.target.slice)
                self.target(s.target, type_, s)
        elif isinstance(s, ast.If):
            self.expression(s.test)
            self.nested(s.body)
            self.nested(s.orelse)
        elif isinstance(s, ast.For):
            call = s.iter
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Name)
                and call.func.id == "range"
                and 1 <= len(call.args) <= 3
                and not call.keywords
                and isinstance(s.target, ast.Name)
                and not s.orelse
            ):
                raise _refuse(s, "loops are `for name in range(...)` without else")
            if len(call.args) == 3 and not _constant_int(call.args[2]):
                raise _refuse(s, "the step of range() must be an int literal")
            for a in call.args:
                if self.expression(a) != _I:
                    raise _refuse(s, "range() takes ints")
            saved = self.path
            self.path = self._new_block()
            self.assign(s.target.id, _I, s)
            self.variables[s.target.id].nested_assignment = True
            self.body(s.body)
            self.path = saved
        elif isinstance(s, ast.Return):
            if s.value is not None:
                raise _refuse(s, "kernels return nothing")
        elif isinstance(s, ast.Pass):
            pass
        elif isinstance(s, ast.Expr):
            if not (isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)):
                raise _refuse(s, "expression statements other than docstrings")
        else:
            raise _refuse(s, f"{type(s).__name__} statements are not in the kernel language")

    def target(self, target: ast.expr, type_: str, node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            if target.id in self.arguments[:1] and type_ != _F:
                raise _refuse(node, "the time argument stays a float")
            self.assign(target.id, type_, node)
        elif isinstance(target, ast.Subscript):
            if not isinstance(target.value, ast.Name):
                raise _refuse(node, "stores go to a named pointer")
            if self.reference(target.value.id).type != _P:
                raise _refuse(node, f"{target.value.id!r} is not a pointer")
            if type_ == _P:
                raise _refuse(node, "pointers are not stored")
            if self.expression(target.slice) != _I:
                raise _refuse(node, "indices are ints")
            self.written_pointers.add(target.value.id)
        else:
            raise _refuse(node, "assignment targets are names or pointer[index]")

    def expression(self, e: ast.expr) -> str:
        if isinstance(e, ast.Constant):
            if isinstance(e.value, bool):
                return _B
            if isinstance(e.value, int):
                return _I
            if isinstance(e.value, float):
                return _F
            raise _refuse(e, "constants are numbers")
        if isinstance(e, ast.Name):
            if e.id in ("True", "False"):
                return _B
            return self.reference(e.id).type
        if isinstance(e, ast.Subscript):
            if not isinstance(e.value, ast.Name) or self.reference(e.value.id).type != _P:
                raise _refuse(e, "only pointers are indexed")
            if self.expression(e.slice) != _I:
                raise _refuse(e, "indices are ints")
            return _F
        if isinstance(e, ast.BinOp):
            left, right = self.expression(e.left), self.expression(e.right)
            if _P in (left, right) or _B in (left, right):
                raise _refuse(e, "arithmetic on pointers or booleans")
            if left == right == _I and type(e.op) in _INT_OP:
                return _I
            if type(e.op) not in (*_FLOAT_OP, ast.Pow, ast.Mod):
                raise _refuse(e, f"operator {type(e.op).__name__}")
            return _F
        if isinstance(e, ast.UnaryOp):
            operand = self.expression(e.operand)
            if isinstance(e.op, ast.Not):
                return _B
            if operand not in (_F, _I):
                raise _refuse(e, "unary minus of a non-number")
            return operand
        if isinstance(e, ast.Compare):
            operands = [self.expression(operand) for operand in (e.left, *e.comparators)]
            if all(type_ == _B for type_ in operands):
                if any(type(op) not in (ast.Eq, ast.NotEq) for op in e.ops):
                    raise _refuse(e, "conditions are compared with == and != only")
                return _B
            if any(type_ not in (_F, _I) for type_ in operands):
                raise _refuse(e, "comparisons of numbers, or == / != of two conditions")
            for op in e.ops:
                if type(op) not in _FLOAT_CMP:
                    raise _refuse(e, f"comparison {type(op).__name__}")
            return _B
        if isinstance(e, ast.BoolOp):
            for value in e.values:
                if self.expression(value) != _B:
                    raise _refuse(e, "and/or of conditions")
            return _B
        if isinstance(e, ast.IfExp):
            if self.expression(e.test) != _B:
                raise _refuse(e, "the condition of `a if c else b` is a comparison")
            a, b = self.expression(e.body), self.expression(e.orelse)
            if a == b:
                return a
            if {a, b} <= {_F, _I}:
                return _F
            raise _refuse(e, "both branches of `a if c else b` are numbers")
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == "math" and e.attr in _CONSTANTS:
                return _F
            raise _refuse(e, "attributes other than math.pi, math.e, math.inf")
        if isinstance(e, ast.Call):
            return self.call(e)
        raise _refuse(e, f"{type(e).__name__} expressions are not in the kernel language")

    def call(self, e: ast.Call) -> str:
        if e.keywords:
            raise _refuse(e, "keyword arguments")
        types_ = [self.expression(a) for a in e.args]
        name = _call_name(e)
        if name in ("abs", "int", "float") and len(types_) == 1 and types_[0] in (_F, _I):
            return {"abs": types_[0], "int": _I, "float": _F}[name]
        if name in ("min", "max") and len(types_) >= 2 and set(types_) <= {_F, _I}:
            return _I if set(types_) == {_I} else _F
        if name == "pointer_offset" and types_ == [_P, _I]:
            return _P
        if name == "trajectory_state" and types_ == [_P, _F, _I] and _constant_int(e.args[2]):
            return _P
        if name.startswith("math."):
            fn = name[5:]
            if fn in (*_INTRINSIC_1, *_EXTERN_1) and len(types_) == 1 and types_[0] in (_F, _I):
                return _F
            if fn in (*_INTRINSIC_2, *_EXTERN_2) and len(types_) == 2:
                if set(types_) <= {_F, _I}:
                    return _F
        raise _refuse(e, f"call of {name}")


def _call_name(e: ast.Call) -> str:
    f = e.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        return f"{f.value.id}.{f.attr}"
    return "?"


def _constant_int(e: ast.expr) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = e.operand
    return isinstance(e, ast.Constant) and type(e.value) is int


def _constant_int_value(e: ast.expr) -> int:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return -e.operand.value
    return e.value


def _choose_storage(analysis: _Analysis) -> tuple[int, int, int]:
    """Storage of every name; returns the numbers of float, int and pointer scratch slots."""
    slots = {_F: 0, _I: 0, _B: 0, _P: 0}
    for var in analysis.variables.values():
        if var.storage == "argument":
            if var.assignments == 0:
                continue  # a parameter of every function
            var.storage = "scratch" if len(var.units) > 1 else "stack"
        elif len(var.units) > 1:
            var.storage = "scratch"
        elif var.assignments == 1 and not var.nested_assignment and var.definition is not None:
            unit, path = var.definition
            inside = all(u == unit and p[: len(path)] == path for u, p in var.blocks)
            var.storage = "ssa" if inside else "stack"
        elif var.assignments == 1 and var.definition is not None and _loop_local(var):
            var.storage = "ssa"
        else:
            var.storage = "stack"
        if var.storage == "scratch":
            kind = _I if var.type == _B else var.type
            var.slot = slots[kind]
            slots[kind] += 1
    return slots[_F], slots[_I], slots[_P]


def _loop_local(var: _Variable) -> bool:
    """A loop variable or a name assigned once in a block and read only inside it."""
    unit, path = var.definition
    return all(u == unit and p[: len(path)] == path for u, p in var.blocks)


# ----------------------------------------------------------------------------- emission


class _Function:
    """Lines of one LLVM function being written."""

    def __init__(self, header: str) -> None:
        self.header = header
        self.allocas: list[str] = []
        self.lines: list[str] = []
        self.count = 0
        self.labels = 0
        self.terminated = False

    def value(self) -> str:
        self.count += 1
        return f"%r{self.count}"

    def label(self, stem: str) -> str:
        self.labels += 1
        return f"{stem}{self.labels}"

    def emit(self, text: str) -> str:
        if not self.terminated:
            self.lines.append("  " + text)
        return text

    def instruction(self, text: str) -> str:
        name = self.value()
        self.emit(f"{name} = {text}")
        return name

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.terminated = False

    def branch(self, label: str) -> None:
        if not self.terminated:
            self.lines.append(f"  br label %{label}")
        self.terminated = True

    def text(self) -> str:
        body = ["entry:", *self.allocas, *self.lines]
        if not self.terminated:
            body.append("  ret void")
        return "\n".join([self.header, *body, "}"])


class _Emitter:
    """Writes the LLVM functions of one kernel."""

    def __init__(self, symbol: str, analysis: _Analysis, scratch: tuple[int, int, int]) -> None:
        self.symbol = symbol
        self.analysis = analysis
        self.scratch = scratch
        self.declarations: set[str] = set()
        self.functions: list[str] = []
        self.fn: _Function | None = None
        self.env: dict[str, str] = {}  # SSA values and cached loads of names
        self.memo: dict = {}  # cached loads of pointer elements
        self.stack_slots: dict[str, str] = {}
        self.chunk_names: list[str] = []

    # -------------------------------------------------------------- functions
    def _parameters(self, chunk: bool) -> str:
        params = ["double %arg0", "ptr %arg1", "ptr %arg2", "ptr %arg3", "ptr %arg4"]
        if chunk:
            params += ["ptr %fscratch", "ptr %iscratch", "ptr %pscratch"]
        return ", ".join(params)

    def _bind_arguments(self) -> None:
        self.env = {}
        self.memo = {}
        self.stack_slots = {}
        for k, name in enumerate(self.analysis.arguments):
            var = self.analysis.variables[name]
            if var.storage == "argument":
                self.env[name] = f"%arg{k}"

    def main(self, body: list, chunks: list) -> None:
        self.chunk_names = [f"{self.symbol}.chunk{k}" for k in range(len(chunks))]
        for k, chunk in enumerate(chunks):
            header = (
                f"define internal void @{self.chunk_names[k]}({self._parameters(True)}) "
                "noinline nounwind {"
            )
            self.fn = _Function(header)
            self._bind_arguments()
            self._block(chunk)
            self.functions.append(self.fn.text())
        self.fn = _Function(f"define void @{self.symbol}({self._parameters(False)}) nounwind {{")
        self._bind_arguments()
        n_f, n_i, n_p = self.scratch
        if chunks:
            self.fn.allocas.append(f"  %fscratch = alloca double, i64 {max(n_f, 1)}")
            self.fn.allocas.append(f"  %iscratch = alloca i64, i64 {max(n_i, 1)}")
            self.fn.allocas.append(f"  %pscratch = alloca ptr, i64 {max(n_p, 1)}")
        for k, name in enumerate(self.analysis.arguments):
            var = self.analysis.variables[name]
            if var.storage in ("stack", "scratch"):
                self._store_name(name, _F if k == 0 else _P, f"%arg{k}")
        self._block(body)
        self.functions.append(self.fn.text())

    def module(self) -> str:
        return "\n\n".join([*sorted(self.declarations), *self.functions]) + "\n"

    # -------------------------------------------------------------- statements
    def _block(self, statements: list) -> None:
        for s in statements:
            if self.fn.terminated:
                return  # code after a return is never run
            self._statement(s)

    def _nested(self, statements: list) -> None:
        saved_env, saved_memo = dict(self.env), dict(self.memo)
        self._block(statements)
        self.env, self.memo = saved_env, saved_memo

    def _forget_memory_names(self) -> None:
        """After control flow or a chunk call, reload names kept in memory."""
        for name in list(self.env):
            var = self.analysis.variables[name]
            if var.storage in ("stack", "scratch"):
                del self.env[name]
        self.memo = {
            k: v for k, v in self.memo.items() if k[0] not in self.analysis.written_pointers
        }

    def _statement(self, s: ast.stmt) -> None:
        if isinstance(s, _Chunk):
            args = "double %arg0, ptr %arg1, ptr %arg2, ptr %arg3, ptr %arg4"
            args += ", ptr %fscratch, ptr %iscratch, ptr %pscratch"
            self.fn.emit(f"call void @{self.chunk_names[s.index]}({args})")
            self._forget_memory_names()
        elif isinstance(s, ast.Assign):
            type_, value = self._expression(s.value)
            self._assign(s.targets[0], type_, value)
        elif isinstance(s, ast.AugAssign):
            if type(s.op) not in (ast.Add, ast.Sub, ast.Mult):
                raise _refuse(s, "augmented assignment other than += -= *=")
            current = self._expression(s.target if isinstance(s.target, ast.Name) else s.target)
            type_, value = self._binary(s.op, current, self._expression(s.value), s)
            self._assign(s.target, type_, value)
        elif isinstance(s, ast.If):
            self._if(s)
        elif isinstance(s, ast.For):
            self._for(s)
        elif isinstance(s, ast.Return):
            self.fn.emit("ret void")
            self.fn.terminated = True

    def _assign(self, target: ast.expr, type_: str, value: str) -> None:
        if isinstance(target, ast.Name):
            var = self.analysis.variables[target.id]
            type_, value = self._convert(type_, value, var.type)
            if var.type == _P:
                self.memo = {k: v for k, v in self.memo.items() if k[0] != target.id}
            if var.storage == "ssa":
                self.env[target.id] = value
            else:
                self._store_name(target.id, var.type, value)
                self.env[target.id] = value
            return
        base = self._name(target.value.id)
        _, index = self._expression(target.slice)
        _, value = self._convert(type_, value, _F)
        address = self.fn.instruction(f"getelementptr double, ptr {base}, i64 {index}")
        self.fn.emit(f"store double {value}, ptr {address}")
        self.memo.pop((target.value.id, index), None)

    def _slot_address(self, name: str) -> tuple[str, str]:
        """(pointer, LLVM type) of the memory holding name ``name``."""
        var = self.analysis.variables[name]
        if var.storage == "scratch":
            kind = {_F: ("fscratch", _F), _I: ("iscratch", _I), _B: ("iscratch", _I)}.get(
                var.type, ("pscratch", _P)
            )
            address = self.fn.instruction(
                f"getelementptr {kind[1]}, ptr %{kind[0]}, i64 {var.slot}"
            )
            return address, kind[1]
        slot = self.stack_slots.get(name)
        llvm_type = _I if var.type == _B else var.type
        if slot is None:
            slot = f"%stack.{len(self.stack_slots)}"
            self.fn.allocas.append(f"  {slot} = alloca {llvm_type}")
            self.stack_slots[name] = slot
        return slot, llvm_type

    def _store_name(self, name: str, type_: str, value: str) -> None:
        address, llvm_type = self._slot_address(name)
        if type_ == _B:
            value = self.fn.instruction(f"zext i1 {value} to i64")
        self.fn.emit(f"store {llvm_type} {value}, ptr {address}")

    def _name(self, name: str) -> str:
        value = self.env.get(name)
        if value is not None:
            return value
        var = self.analysis.variables[name]
        if var.storage == "ssa":
            raise KernelSourceError(f"kernel source: {name!r} is read where it is not defined")
        address, llvm_type = self._slot_address(name)
        value = self.fn.instruction(f"load {llvm_type}, ptr {address}")
        if var.type == _B:
            value = self.fn.instruction(f"trunc i64 {value} to i1")
        self.env[name] = value
        return value

    def _if(self, s: ast.If) -> None:
        _, test = self._expression(s.test)
        then, other, after = self.fn.label("then"), self.fn.label("else"), self.fn.label("endif")
        self.fn.emit(f"br i1 {test}, label %{then}, label %{other}")
        self.fn.terminated = True
        self.fn.start(then)
        self._nested(s.body)
        self.fn.branch(after)
        self.fn.start(other)
        self._nested(s.orelse)
        self.fn.branch(after)
        self.fn.start(after)
        self._forget_memory_names()

    def _for(self, s: ast.For) -> None:
        args = s.iter.args
        start = self._expression(args[0])[1] if len(args) > 1 else "0"
        stop = self._expression(args[1] if len(args) > 1 else args[0])[1]
        step = _constant_int_value(args[2]) if len(args) == 3 else 1
        if step == 0:
            raise _refuse(s, "range() step 0")
        here = self.fn.label("preheader")
        self.fn.branch(here)
        self.fn.start(here)
        head, body, after = self.fn.label("loop"), self.fn.label("body"), self.fn.label("endloop")
        latch = self.fn.label("latch")
        self.fn.branch(head)
        self.fn.start(head)
        index = self.fn.value()
        following = self.fn.value()
        self.fn.emit(f"{index} = phi i64 [ {start}, %{here} ], [ {following}, %{latch} ]")
        cmp = "slt" if step > 0 else "sgt"
        going = self.fn.instruction(f"icmp {cmp} i64 {index}, {stop}")
        self.fn.emit(f"br i1 {going}, label %{body}, label %{after}")
        self.fn.terminated = True
        self.fn.start(body)
        saved_env, saved_memo = dict(self.env), dict(self.memo)
        self._forget_memory_names()
        self._assign(s.target, _I, index)
        self._block(s.body)
        self.env, self.memo = saved_env, saved_memo
        self.fn.branch(latch)
        self.fn.start(latch)
        self.fn.emit(f"{following} = add i64 {index}, {step}")
        self.fn.emit(f"br label %{head}")
        self.fn.terminated = True
        self.fn.start(after)
        self._forget_memory_names()

    # -------------------------------------------------------------- expressions
    def _convert(self, type_: str, value: str, wanted: str) -> tuple[str, str]:
        if type_ == wanted or wanted is None:
            return type_, value
        if type_ == _I and wanted == _F:
            if value.lstrip("-").isdigit():
                return _F, _float_literal(float(int(value)))
            return _F, self.fn.instruction(f"sitofp i64 {value} to double")
        if type_ == _B and wanted == _F:
            return _F, self.fn.instruction(f"uitofp i1 {value} to double")
        if type_ == _B and wanted == _I:
            return _I, self.fn.instruction(f"zext i1 {value} to i64")
        raise KernelSourceError(f"kernel source: cannot use a {type_} as a {wanted}")

    def _expression(self, e: ast.expr) -> tuple[str, str]:
        if isinstance(e, ast.Constant):
            if isinstance(e.value, bool):
                return _B, "true" if e.value else "false"
            if isinstance(e.value, int):
                return _I, str(e.value)
            return _F, _float_literal(e.value)
        if isinstance(e, ast.Name):
            if e.id in ("True", "False") and e.id not in self.analysis.variables:
                return _B, "true" if e.id == "True" else "false"
            return self.analysis.variables[e.id].type, self._name(e.id)
        if isinstance(e, ast.Subscript):
            _, index = self._expression(e.slice)
            key = (e.value.id, index)
            cached = self.memo.get(key)
            if cached is not None:
                return _F, cached
            base = self._name(e.value.id)
            address = self.fn.instruction(f"getelementptr double, ptr {base}, i64 {index}")
            value = self.fn.instruction(f"load double, ptr {address}")
            if e.value.id not in self.analysis.written_pointers:
                self.memo[key] = value
            return _F, value
        if isinstance(e, ast.BinOp):
            return self._binary(e.op, self._expression(e.left), self._expression(e.right), e)
        if isinstance(e, ast.UnaryOp):
            type_, value = self._expression(e.operand)
            if isinstance(e.op, ast.UAdd):
                return type_, value
            if isinstance(e.op, ast.Not):
                return _B, self.fn.instruction(f"xor i1 {value}, true")
            if type_ == _I:
                if value.lstrip("-").isdigit():
                    return _I, str(-int(value))
                return _I, self.fn.instruction(f"sub i64 0, {value}")
            return _F, self.fn.instruction(f"fneg double {value}")
        if isinstance(e, ast.Compare):
            result = None
            left = self._expression(e.left)
            for op, comparator in zip(e.ops, e.comparators):
                right = self._expression(comparator)
                if left[0] == right[0] == _B:
                    test = self.fn.instruction(
                        f"icmp {_INT_CMP[type(op)]} i1 {left[1]}, {right[1]}"
                    )
                elif left[0] == right[0] == _I:
                    test = self.fn.instruction(
                        f"icmp {_INT_CMP[type(op)]} i64 {left[1]}, {right[1]}"
                    )
                else:
                    a = self._convert(*left, _F)[1]
                    b = self._convert(*right, _F)[1]
                    test = self.fn.instruction(f"fcmp {_FLOAT_CMP[type(op)]} double {a}, {b}")
                result = test if result is None else self.fn.instruction(f"and i1 {result}, {test}")
                left = right
            return _B, result
        if isinstance(e, ast.BoolOp):
            op = "and" if isinstance(e.op, ast.And) else "or"
            values = [self._expression(v)[1] for v in e.values]
            result = values[0]
            for v in values[1:]:
                result = self.fn.instruction(f"{op} i1 {result}, {v}")
            return _B, result
        if isinstance(e, ast.IfExp):
            _, test = self._expression(e.test)
            a, b = self._expression(e.body), self._expression(e.orelse)
            type_ = a[0] if a[0] == b[0] else _F
            a, b = self._convert(*a, type_), self._convert(*b, type_)
            llvm_type = type_
            return type_, self.fn.instruction(
                f"select i1 {test}, {llvm_type} {a[1]}, {llvm_type} {b[1]}"
            )
        if isinstance(e, ast.Attribute):
            return _F, _float_literal(_CONSTANTS[e.attr])
        if isinstance(e, ast.Call):
            return self._call(e)
        raise _refuse(e, "unsupported expression")

    def _binary(self, op: ast.operator, left, right, node) -> tuple[str, str]:
        if left[0] == right[0] == _I and type(op) in _INT_OP:
            a, b = left[1], right[1]
            if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
                folded = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__}
                return _I, str(folded[type(op)](int(a), int(b)))
            return _I, self.fn.instruction(f"{_INT_OP[type(op)]} i64 {a}, {b}")
        a = self._convert(*left, _F)[1]
        b = self._convert(*right, _F)[1]
        if isinstance(op, ast.Pow):
            return _F, self._intrinsic("llvm.pow.f64", [a, b])
        if isinstance(op, ast.Mod):
            return _F, self._python_modulo(a, b)
        if type(op) not in _FLOAT_OP:
            raise _refuse(node, f"operator {type(op).__name__}")
        return _F, self.fn.instruction(f"{_FLOAT_OP[type(op)]} double {a}, {b}")

    def _python_modulo(self, a: str, b: str) -> str:
        """``a % b`` with Python's sign convention (the sign of ``b``), as numba computes it."""
        r = self._extern("fmod", [a, b])
        nonzero = self.fn.instruction(f"fcmp une double {r}, 0.0")
        r_negative = self.fn.instruction(f"fcmp olt double {r}, 0.0")
        b_negative = self.fn.instruction(f"fcmp olt double {b}, 0.0")
        differ = self.fn.instruction(f"xor i1 {r_negative}, {b_negative}")
        adjust = self.fn.instruction(f"and i1 {nonzero}, {differ}")
        shifted = self.fn.instruction(f"fadd double {r}, {b}")
        return self.fn.instruction(f"select i1 {adjust}, double {shifted}, double {r}")

    def _intrinsic(self, name: str, args: list[str]) -> str:
        params = ", ".join(["double"] * len(args))
        self.declarations.add(f"declare double @{name}({params})")
        call_args = ", ".join(f"double {a}" for a in args)
        return self.fn.instruction(f"call double @{name}({call_args})")

    def _extern(self, name: str, args: list[str]) -> str:
        return self._intrinsic(name, args)

    def _call(self, e: ast.Call) -> tuple[str, str]:
        name = _call_name(e)
        if name == "pointer_offset":
            base = self._expression(e.args[0])[1]
            offset = self._expression(e.args[1])[1]
            return _P, self.fn.instruction(f"getelementptr double, ptr {base}, i64 {offset}")
        if name == "trajectory_state":
            buffer = self._expression(e.args[0])[1]
            t = self._convert(*self._expression(e.args[1]), _F)[1]
            offset = _constant_int_value(e.args[2])
            self.declarations.add(f"declare void @{TRAJECTORY_STATE_SYMBOL}(ptr, double)")
            self.fn.emit(f"call void @{TRAJECTORY_STATE_SYMBOL}(ptr {buffer}, double {t})")
            self.memo = {}  # the call writes into the buffer
            return _P, self.fn.instruction(f"getelementptr double, ptr {buffer}, i64 {offset}")
        args = [self._expression(a) for a in e.args]
        if name in ("int", "float"):
            type_, value = args[0]
            if name == "float":
                return self._convert(type_, value, _F)
            if type_ == _I:
                return _I, value
            return _I, self.fn.instruction(f"fptosi double {value} to i64")
        if name == "abs":
            type_, value = args[0]
            if type_ == _I:
                negative = self.fn.instruction(f"icmp slt i64 {value}, 0")
                flipped = self.fn.instruction(f"sub i64 0, {value}")
                return _I, self.fn.instruction(f"select i1 {negative}, i64 {flipped}, i64 {value}")
            return _F, self._intrinsic("llvm.fabs.f64", [value])
        if name in ("min", "max"):
            # Python's min/max: the first extreme argument (an argument replaces the current
            # one only when strictly smaller / larger)
            type_ = _I if all(a[0] == _I for a in args) else _F
            values = [self._convert(*a, type_)[1] for a in args]
            result = values[0]
            for v in values[1:]:
                if type_ == _I:
                    cmp = "slt" if name == "min" else "sgt"
                    test = self.fn.instruction(f"icmp {cmp} i64 {v}, {result}")
                else:
                    cmp = "olt" if name == "min" else "ogt"
                    test = self.fn.instruction(f"fcmp {cmp} double {v}, {result}")
                result = self.fn.instruction(f"select i1 {test}, {type_} {v}, {type_} {result}")
            return type_, result
        fn = name[5:]
        values = [self._convert(*a, _F)[1] for a in args]
        if fn in _INTRINSIC_1:
            return _F, self._intrinsic(_INTRINSIC_1[fn], values)
        if fn in _INTRINSIC_2:
            return _F, self._intrinsic(_INTRINSIC_2[fn], values)
        if fn in _EXTERN_1:
            return _F, self._extern(_EXTERN_1[fn], values)
        return _F, self._extern(_EXTERN_2[fn], values)


def _check_signature(function: ast.FunctionDef) -> list[str]:
    a = function.args
    names = [x.arg for x in a.args]
    if (
        len(names) != 5
        or a.vararg
        or a.kwarg
        or a.kwonlyargs
        or a.defaults
        or a.posonlyargs
        or len(set(names)) != 5
    ):
        raise KernelSourceError(
            f"kernel {function.name!r}: the signature is (t, y, p, v, out) "
            "(five distinct positional arguments)"
        )
    return names


def kernel_ir(function: ast.FunctionDef, symbol: str) -> str:
    """The LLVM module (text) defining ``void @symbol(double, ptr, ptr, ptr, ptr)``.

    Parameters
    ----------
    function : ast.FunctionDef
        One kernel of a generated module (see :func:`function_definitions`); it is
        modified (split into chunks).
    symbol : str
        Name of the exported function (unique within a process: it carries the cache key).
    """
    arguments = _check_signature(function)
    temps = _Temporaries()
    body = _split_expressions(list(function.body), temps)
    total = sum(_size(s) for s in body)
    chunks: list = []
    body = _partition(body, chunks, chunk_all=total > CHUNK_OPERATIONS)
    analysis = _Analysis(arguments)
    analysis.body(body)
    scratch = _choose_storage(analysis)
    emitter = _Emitter(symbol, analysis, scratch)
    emitter.main(body, chunks)
    return emitter.module()


def iter_kernel_names(source: str) -> Iterator[str]:
    """Names of the kernels (functions) of generated ``source``."""
    yield from function_definitions(source)

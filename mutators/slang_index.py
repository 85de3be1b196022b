"""pyslang syntax tree → :class:`~hwtp.mutators.context.SiteContext`.

Only run-time places are recorded (module docstring of :mod:`hwtp.mutators.context`):
continuous-assign and net-declaration right-hand sides, and inside ``always``/``initial``
blocks and function/task bodies the right-hand sides of ``=``/``<=``, ``if`` conditions and
``case`` selectors. Everything else (parameters, declaration ranges, ports, instances,
generate conditions and loop headers, case labels, event controls other than edges, delays)
is skipped. Spans come from pyslang's source ranges, which are UTF-8 byte offsets.

Only text of the file itself is indexed: a place with a token from a macro expansion or an
included file (whose offsets are not this file's) is not one, nor is a module declared in an
included file; an expression holding a macro use is skipped but its operands that hold none
are still roots.
"""

from __future__ import annotations

from typing import Any

import pyslang

from hwtp.mutators.context import (
    Anchor,
    Assign,
    Case,
    CaseItem,
    Event,
    Expr,
    Root,
    RootRole,
    Selector,
    SiteContext,
    Span,
)
from hwtp.rtl.frontend import module_declarations

SK = pyslang.syntax.SyntaxKind
Node = Any  # pyslang syntax nodes are not precisely typed

_ASSIGNMENTS = {SK.AssignmentExpression: "=", SK.NonblockingAssignmentExpression: "<="}
_COMPOUND = {getattr(SK, k) for k in dir(SK) if k.endswith("AssignmentExpression")}
_PROCEDURAL = {SK.AlwaysBlock, SK.AlwaysCombBlock, SK.AlwaysFFBlock, SK.AlwaysLatchBlock,
               SK.InitialBlock, SK.FinalBlock}
_SUBROUTINES = {SK.FunctionDeclaration, SK.TaskDeclaration}
_DECLARATIONS = {SK.NetDeclaration, SK.DataDeclaration, SK.PortDeclaration,
                 SK.ParameterDeclarationStatement}
_LOOPS = {SK.ForLoopStatement, SK.LoopStatement, SK.ForeverStatement, SK.DoWhileStatement,
          SK.ForeachLoopStatement}
_BLOCKS = {SK.SequentialBlockStatement, SK.ParallelBlockStatement}
_LITERALS = {SK.IntegerLiteralExpression, SK.IntegerVectorExpression}
_NAMES = {SK.IdentifierName, SK.ScopedName, SK.SystemName}
_STEPS = {SK.UnaryPreincrementExpression, SK.UnaryPredecrementExpression}
_INDEXED = {SK.AscendingRangeSelect, SK.DescendingRangeSelect}
_WRAPPERS = {SK.SimplePropertyExpr, SK.SimpleSequenceExpr}


def _span(node: Node) -> tuple[int, int]:
    rng = node.sourceRange
    return rng.start.offset, rng.end.offset


def _nodes(node: Node) -> list[Node]:
    return [c for c in node if isinstance(c, pyslang.syntax.SyntaxNode)]


def index_tree(ctx: SiteContext, tree: pyslang.syntax.SyntaxTree) -> None:
    """Fill ``ctx`` from every module of ``tree`` that the file itself declares."""
    indexer = _Indexer(ctx, tree.sourceManager)
    for module in module_declarations(tree):
        if indexer.own(module.header):
            indexer.module(module)


class _Indexer:
    def __init__(self, ctx: SiteContext, manager: pyslang.SourceManager) -> None:
        self.ctx = ctx
        self.manager = manager
        self.plain = "`" not in ctx.text  # no directive at all: every token is the file's own

    def own(self, node: Node) -> bool:
        """True when every token of ``node`` is text of this file (no macro expansion, no
        included file): its spans are then offsets into ``ctx.text``."""
        if self.plain:
            return True
        manager = self.manager

        def clean(item: Any) -> bool:
            if isinstance(item, pyslang.parsing.Token):
                loc = item.location
                return bool(manager.isFileLoc(loc)) and not manager.isIncludedFileLoc(loc)
            return all(clean(c) for c in item if c is not None)

        return clean(node)

    # -- module level ---------------------------------------------------------------------
    def module(self, node: Node) -> None:
        header = node.header
        for part in (header.parameters, header.ports):
            if part is not None:
                self.widths(part)
        for member in _nodes(node.members):
            self.member(member)

    def member(self, node: Node, scoped: bool = True) -> None:
        """A module item; ``scoped`` is false for the bare item of a generate if/case/loop."""
        kind = node.kind
        if kind == SK.ContinuousAssign:
            for assignment in _nodes(node.assignments):
                if assignment.kind == SK.AssignmentExpression:
                    self.root(assignment.right, "rhs", False, node, Span(*_span(assignment.left)), continuous=True,
                              scoped=scoped)
        elif kind in _DECLARATIONS:
            self.declaration(node, scoped)
        elif kind in _PROCEDURAL:
            self.statement(node.statement, False)
        elif kind in _SUBROUTINES:
            self.widths(node.prototype)
            for item in _nodes(node.items):
                if item.kind in _DECLARATIONS:
                    self.widths(item)
                else:
                    self.statement(item, True)
        elif kind in (SK.GenerateRegion, SK.GenerateBlock):
            for member in _nodes(node.members):
                self.member(member)
        elif kind == SK.LoopGenerate:
            self.member(node.block, node.block.kind == SK.GenerateBlock)
        elif kind == SK.IfGenerate:
            self.member(node.block, node.block.kind == SK.GenerateBlock)
            if node.elseClause is not None:
                clause = node.elseClause.clause
                self.member(clause, clause.kind == SK.GenerateBlock)
        elif kind == SK.CaseGenerate:
            for item in _nodes(node.items):
                self.member(item.clause, item.clause.kind == SK.GenerateBlock)

    def declaration(self, node: Node, scoped: bool = True) -> None:
        """Ranges and parameter values are widths; a net's initializer is a continuous
        assignment; a variable's initial value is neither (skipped)."""
        if node.kind not in (SK.NetDeclaration, SK.DataDeclaration):
            self.widths(node)
            return
        self.widths(node.type)
        for declarator in _nodes(node.declarators):
            for dimension in _nodes(declarator.dimensions):
                self.widths(dimension)
            if declarator.initializer is not None and node.kind == SK.NetDeclaration:
                name = declarator.name.range
                self.root(declarator.initializer.expr, "rhs", False, node,
                          Span(name.start.offset, name.end.offset),
                          continuous=True, scoped=scoped)

    def foreign(self, node: Node, sub: bool) -> None:
        """A statement holding a macro use or included text: no statement site in it, only
        the run-time expressions under it that hold neither (as right-hand sides)."""
        kind = node.kind
        if kind == SK.ExpressionStatement and node.expr.kind in _ASSIGNMENTS:
            value = node.expr.right
            self.root(value.expr if value.kind == SK.TimingControlExpression else value, "rhs", sub)
        elif kind == SK.ConditionalStatement:
            for condition in _nodes(node.predicate.conditions):
                if condition.matchesClause is None:
                    self.root(condition.expr, "rhs", sub)
            self.statement(node.statement, sub)
            if node.elseClause is not None:
                self.statement(node.elseClause.clause, sub)
        elif kind == SK.CaseStatement:
            self.root(node.expr, "rhs", sub)
            for item in _nodes(node.items):
                self.statement(item.clause, sub)
        elif kind in _BLOCKS:
            for item in _nodes(node.items):
                self.statement(item, sub)
        elif kind in (SK.TimingControlStatement, *_LOOPS):
            self.statement(node.statement, sub)

    def widths(self, node: Node) -> None:
        """Record the literals under ``node`` except replication counts."""
        if not self.own(node):
            for child in _nodes(node):
                self.widths(child)
            return
        if node.kind in _LITERALS:
            start, end = _span(node)
            self.ctx.width_literals.append(Expr("literal", start, end, start, end))
        elif node.kind == SK.MultipleConcatenationExpression:
            self.widths(node.concatenation)
        else:
            for child in _nodes(node):
                self.widths(child)

    # -- statements -----------------------------------------------------------------------
    def statement(self, node: Node, sub: bool) -> None:
        if not self.own(node):
            self.foreign(node, sub)
            return
        kind = node.kind
        if kind == SK.ExpressionStatement:
            self.assignment(node, sub)
        elif kind == SK.ConditionalStatement:
            conditions = _nodes(node.predicate.conditions)
            if len(conditions) == 1 and conditions[0].matchesClause is None:
                self.root(conditions[0].expr, "if", sub, node)
            self.statement(node.statement, sub)
            if node.elseClause is not None:
                self.statement(node.elseClause.clause, sub)
        elif kind == SK.CaseStatement:
            self.case(node, sub)
        elif kind in _BLOCKS:
            for item in _nodes(node.items):
                self.statement(item, sub)
        elif kind == SK.TimingControlStatement:
            self.events(node.timingControl)
            self.statement(node.statement, sub)
        elif kind in _LOOPS:
            self.statement(node.statement, sub)

    def assignment(self, node: Node, sub: bool) -> None:
        expr = node.expr
        op = _ASSIGNMENTS.get(expr.kind)
        if op is None:
            return
        start, end = _span(node)
        token = expr.operatorToken.range
        self.ctx.assigns.append(Assign(start, end, op, token.start.offset, token.end.offset, sub))
        value = expr.right
        if value.kind == SK.TimingControlExpression:  # q <= #1 d: the value is d
            value = value.expr
        self.root(value, "rhs", sub, node, Span(*_span(expr.left)))

    def case(self, node: Node, sub: bool) -> None:
        """A case statement; only plain ones (no ``inside``/``matches``) get case sites."""
        self.root(node.expr, "case", sub, node)
        items = []
        for item in _nodes(node.items):
            self.statement(item.clause, sub)
            if item.kind in (SK.StandardCaseItem, SK.DefaultCaseItem):
                start, end = _span(item)
                body = Span(*_span(item.clause))
                items.append(CaseItem(start, end, body, item.kind == SK.DefaultCaseItem))
        if not node.matchesOrInside and len(items) == len(_nodes(node.items)):
            self.ctx.cases.append(Case(*_span(node), tuple(items)))

    def events(self, node: Node) -> None:
        kind = node.kind
        if kind in (SK.EventControlWithExpression, SK.ParenthesizedEventExpression):
            self.events(node.expr)
        elif kind == SK.BinaryEventExpression:
            self.events(node.left)
            self.events(node.right)
        elif kind == SK.SignalEventExpression and node.iffClause is None:
            edge = node.edge
            if edge.rawText in ("posedge", "negedge"):
                start, end = _span(node)
                self.ctx.events.append(Event(start, end, edge.rawText, edge.range.start.offset,
                                             edge.range.end.offset))

    # -- expressions ----------------------------------------------------------------------
    def root(self, node: Node, role: RootRole, sub: bool, holder: Node | None = None, lhs: Span | None = None,
             continuous: bool = False, scoped: bool = True) -> None:
        """A root expression ``node``, evaluated by statement (or module item) ``holder``. Only a
        root and holder made of this file's own text get an anchor (an activation probe): the
        operands of an expression that uses a macro, and roots under a statement holding macro or
        included text (``holder`` None), are mutated but not probed."""
        if self.own(node):
            tree = expr(node)
            self.ctx.roots.append(Root(tree, role, sub))
            if holder is not None and self.own(holder):
                self.ctx.anchors.append(Anchor(Span(tree.outer_start, tree.outer_end), role, Span(*_span(holder)),
                                               continuous, lhs, sub, scoped))
            return
        # a macro use inside: the operands that hold none are run-time expressions too
        kind = node.kind
        if kind == SK.ParenthesizedExpression:
            operands = [node.expression]
        elif isinstance(node, pyslang.syntax.BinaryExpressionSyntax) and kind not in _COMPOUND:
            operands = [node.left, node.right]
        elif isinstance(node, pyslang.syntax.PrefixUnaryExpressionSyntax) and kind not in _STEPS:
            operands = [node.operand]
        elif kind == SK.ConditionalExpression:
            operands = [c.expr for c in _nodes(node.predicate.conditions) if c.matchesClause is None]
            operands += [node.left, node.right]
        else:
            operands = []
        for operand in operands:
            self.root(operand, "rhs", sub)


def expr(node: Node) -> Expr:
    """The :class:`Expr` of a pyslang expression (``other`` for what no operator handles)."""
    kind = node.kind
    start, end = _span(node)
    if kind == SK.ParenthesizedExpression:
        return expr(node.expression).wrapped(start, end)
    if kind in _WRAPPERS and getattr(node, "repetition", None) is None:
        return expr(node.expr)
    if isinstance(node, pyslang.syntax.BinaryExpressionSyntax) and kind not in _COMPOUND:
        return _operator("binary", node, start, end, (expr(node.left), expr(node.right)))
    if isinstance(node, pyslang.syntax.PrefixUnaryExpressionSyntax) and kind not in _STEPS:
        return _operator("unary", node, start, end, (expr(node.operand),))
    if kind == SK.ConditionalExpression:
        conditions = _nodes(node.predicate.conditions)
        if len(conditions) == 1 and conditions[0].matchesClause is None:
            parts = (expr(conditions[0].expr), expr(node.left), expr(node.right))
            return Expr("cond", start, end, start, end, children=parts)
    elif kind in _NAMES:
        return Expr("name", start, end, start, end)
    elif kind in _LITERALS:
        return Expr("literal", start, end, start, end)
    elif kind == SK.IdentifierSelectName:
        return _select(node, start, end)
    elif kind == SK.ConcatenationExpression:
        items = tuple(expr(e) for e in _nodes(node.expressions))
        return Expr("concat", start, end, start, end, children=items)
    elif kind == SK.MultipleConcatenationExpression:
        return Expr("repeat", start, end, start, end, children=(expr(node.concatenation),))
    elif kind == SK.InvocationExpression:
        return _call(node, start, end)
    return Expr("other", start, end, start, end)


def _operator(kind: Any, node: Node, start: int, end: int, children: tuple[Expr, ...]) -> Expr:
    token = node.operatorToken
    return Expr(kind, start, end, start, end, token.rawText, token.range.start.offset,
                token.range.end.offset, children)


def _select(node: Node, start: int, end: int) -> Expr:
    selectors: list[Selector] = []
    for element in _nodes(node.selectors):
        sel = element.selector
        if sel is None:
            return Expr("other", start, end, start, end)
        if sel.kind == SK.BitSelect:
            selectors.append(Selector("bit", index=expr(sel.expr)))
        elif sel.kind in _INDEXED:
            selectors.append(Selector("indexed", index=expr(sel.left)))
        else:
            bounds = (Span(*_span(sel.left)), Span(*_span(sel.right)))
            selectors.append(Selector("range", bounds=bounds))
    indices = tuple(s.index for s in selectors if s.index is not None)
    return Expr("select", start, end, start, end, children=indices, selectors=tuple(selectors))


def _call(node: Node, start: int, end: int) -> Expr:
    args: list[Expr] = []
    if node.arguments is not None:
        for arg in _nodes(node.arguments.parameters):
            if arg.kind != SK.OrderedArgument:
                return Expr("other", start, end, start, end)
            args.append(expr(arg.expr))
    return Expr("call", start, end, start, end, children=tuple(args))

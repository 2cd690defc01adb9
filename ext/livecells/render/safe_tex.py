"""Which TeX a cell's math may carry into a page: an allowlist of math commands.

Math from a cell goes to MathJax (HTML) or into a ``.tex`` file (LaTeX). MathJax's ``\\href``,
``\\style``, ``\\class``, ``\\cssId``, ``\\require`` put links, CSS or code into the page; TeX's
primitives read and write files (``\\input``, ``\\openout``, ``\\pdffiledump``), run commands
or change how TeX reads what follows (``\\catcode``, ``\\def``, ``\\everypar``,
``\\AtEndDocument``). A list of those is never complete, so :func:`unsafe_tex` refuses any
command that is not on this list of math notation: letters, digits, symbols, and the macros that
math (SymPy's, a hand-written ``Latex``) uses, each defined both by MathJax and by the LaTeX
packages Sphinx loads (amsmath, amssymb). Nothing here knows Sphinx.
"""

from __future__ import annotations

import re

_GREEK = """
alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa varkappa lambda mu
nu xi pi varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta
Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega digamma
"""
_SYMBOLS = """
aleph beth gimel daleth ell hbar hslash imath jmath wp Re Im partial nabla infty emptyset
varnothing forall exists nexists neg lnot top bot angle measuredangle triangle square
blacksquare surd flat natural sharp clubsuit diamondsuit heartsuit spadesuit prime backprime
dagger ddagger S P checkmark
pm mp times div cdot cdotp ldotp ast star circ bullet oplus ominus otimes oslash odot cap cup
uplus sqcap sqcup vee wedge land lor setminus smallsetminus wr diamond bigtriangleup
bigtriangledown triangleleft triangleright amalg
leq le geq ge neq ne equiv approx approxeq sim simeq cong asymp doteq propto models vdash
dashv perp parallel mid nmid ll gg lll ggg prec succ preceq succeq subset supset subseteq
supseteq subsetneq supsetneq sqsubset sqsupset sqsubseteq sqsupseteq in ni notin owns smile
frown bowtie leqslant geqslant lesssim gtrsim nless ngtr nleq ngeq
leftarrow gets rightarrow to leftrightarrow Leftarrow Rightarrow Leftrightarrow longleftarrow
longrightarrow longleftrightarrow Longleftarrow Longrightarrow Longleftrightarrow mapsto
longmapsto hookleftarrow hookrightarrow uparrow downarrow updownarrow Uparrow Downarrow
Updownarrow nearrow searrow swarrow nwarrow leftharpoonup rightharpoonup leftharpoondown
rightharpoondown rightleftharpoons iff implies impliedby xrightarrow xleftarrow
ldots cdots vdots ddots dots dotsc dotsb dotsm dotsi colon backslash
lbrace rbrace lbrack rbrack langle rangle lceil rceil lfloor rfloor vert Vert lvert rvert lVert
rVert ulcorner urcorner llcorner lrcorner
sum prod coprod int iint iiint oint bigcup bigcap bigvee bigwedge bigoplus bigotimes bigodot
biguplus bigsqcup
"""
_FUNCTIONS = """
sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh coth exp log ln lg lim liminf limsup
max min sup inf arg det dim gcd hom ker deg Pr bmod pmod mod
"""
_STRUCTURE = """
frac dfrac tfrac cfrac sqrt binom dbinom tbinom choose over atop
left right middle big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr Biggl Biggr
hat check breve acute grave tilde bar vec dot ddot dddot mathring widehat widetilde overline
underline overbrace underbrace overrightarrow overleftarrow overleftrightarrow
overset underset stackrel substack limits nolimits displaystyle textstyle scriptstyle
scriptscriptstyle
mathrm mathit mathbf mathsf mathtt mathcal mathbb mathfrak boldsymbol mathnormal
text textrm textit textbf textsf texttt textnormal mbox operatorname mathop mathbin mathrel
mathord mathopen mathclose mathpunct
quad qquad enspace thinspace negthinspace phantom vphantom hphantom smash mathstrut strut
begin end hline cline nonumber notag boxed not
"""
#: Every command a cell's math may use (``\name``).
ALLOWED_COMMANDS = frozenset((_GREEK + _SYMBOLS + _FUNCTIONS + _STRUCTURE).split())
#: ``\begin{...}`` environments: math arrays and alignments, nothing that writes or reads.
ALLOWED_ENVIRONMENTS = frozenset(
    """matrix pmatrix bmatrix Bmatrix vmatrix Vmatrix smallmatrix array subarray aligned alignedat
    gathered cases split align alignat flalign equation gather multline eqnarray""".split()
)
#: Control symbols (``\`` and one character that is not a letter): spaces, escaped specials.
ALLOWED_SYMBOLS = frozenset(",;:!> \t\n\\{}|#$%&_")

# A control word or symbol, "^^" (TeX's character-code notation), a raw "#" (a parameter), "%"
# (a comment: it would hide the closing delimiter), "$" (it leaves math mode), or a brace.
_TOKEN = re.compile(r"\\([A-Za-z]+)|\\(.)|\^\^|[#%$]|\\$|([{}])", re.DOTALL)
_ENVIRONMENT = re.compile(r"\s*\{([A-Za-z]+\*?)\}")


def unsafe_tex(tex: str) -> str | None:
    """Why ``tex`` is not allowed math: a command off the list (``\\href``), an environment off
    it (``\\begin{filecontents}``), ``^^``, ``#``, ``%``, ``$``; or a group, environment or
    ``\\left`` closed that it did not open, or left open (either would end or swallow the
    page's own). None when it is allowed."""
    opened: list[tuple[str, str]] = []  # (what opened, what closes it)
    for token in _TOKEN.finditer(tex):
        word, symbol, brace = token.group(1), token.group(2), token.group(3)
        closing = ""
        if brace == "{":
            opened.append(("{", "}"))
        elif brace == "}":
            closing = "}"
        elif word is None:
            if symbol is not None and symbol in ALLOWED_SYMBOLS:
                continue
            return f"{token.group(0)!r}, which is not on the list of math commands"
        elif word not in ALLOWED_COMMANDS:
            return f"{chr(92) + word!r}, which is not on the list of math commands"
        elif word in {"begin", "end"}:
            environment = _ENVIRONMENT.match(tex, token.end())
            if environment is None or environment.group(1).rstrip("*") not in ALLOWED_ENVIRONMENTS:
                shown = chr(92) + word + (environment.group(0).strip() if environment else "")
                return f"{shown!r}, which is not on the list of math environments"
            name = environment.group(1)
            if word == "begin":
                opened.append((f"\\begin{{{name}}}", f"\\end{{{name}}}"))
            else:
                closing = f"\\end{{{name}}}"
        elif word == "left":
            opened.append(("\\left", "\\right"))
        elif word == "right":
            closing = "\\right"
        if closing and (not opened or opened.pop()[1] != closing):
            return f"{closing!r}, which closes nothing it opened"
    if opened:
        return f"{opened[-1][0]!r}, which it leaves open"
    return None

"""The grader's rows for answer syntaxes other than LaTeX (syntaxes.py) and for shapes and revisions: both sides of
every rule. tests/grader_cases.py merges them into EQUIV and RESPONSES; tests/test_reward.py asserts every row.
"""

SYNTAX_EQUIV = {
    # ---- siunitx: the number, its unit as text ------------------------------------------------------------------
    "siunitx": [
        ("\\SI{3.6}{\\kilo\\metre}", "3.6", True), ("\\SI{3.6}{\\kilo\\metre}", "3600 \\text{ m}", True),
        ("\\SI{3.6}{\\kilo\\metre}", "36", False), ("\\qty{7}{\\metre\\per\\second}", "7 \\text{ m/s}", True),
        ("\\qty{7}{\\metre\\per\\second}", "7 \\text{ m}", False), ("\\num{1.2e4}", "12000", True),
        ("\\num{1.2e-4}", "12000", False), ("\\num{6.02e23}", "6.02 \\times 10^{23}", True), ("\\ang{45}", "\\frac{\\pi}{4}", True),
    ],
    # ---- computer algebra and Python printouts -------------------------------------------------------------------
    "cas_syntax": [
        ("5 Sqrt[3]", "5\\sqrt3", True), ("5 Sqrt[3]", "3\\sqrt5", False), ("ArcSin[1/2]", "\\frac{\\pi}{6}", True),
        ("2 Pi", "2\\pi", True), ("{{x -> 3}, {x -> -3}}", "\\pm 3", True), ("{{x -> 3}}", "\\pm 3", False),
        ("Log[E^2]", "2", True), ("3*sqrt(5)", "3\\sqrt5", True), ("5*sqrt(3)", "3\\sqrt5", False),
        ("3 - 4*I", "3-4i", True), ("3 + 4*I", "3-4i", False), ("-oo", "-\\infty", True), ("oo", "-\\infty", False),
        ("x**3 - 2*x", "x^3-2x", True), ("x**2 - 2*x", "x^3-2x", False), ("np.float64(2.5)", "\\frac52", True),
        ("np.int64(12)", "13", False), ("Fraction(5, 6)", "\\frac56", True), ("Fraction(6, 5)", "\\frac56", False),
        ("array([1., 4., 9.])", "1, 4, 9", True), ("array([1., 4.])", "1, 4, 9", False),
    ],
    # ---- separators: semicolon tuples, outward-bracket intervals, ranges with an ellipsis -----------------------------
    "separators": [
        ("(4; -1)", "(4,-1)", True), ("(-1; 4)", "(4,-1)", False), ("P(0;\\ 5)", "(0,5)", True),
        ("(a;b) = (1;2)", "(1,2)", True), ("]0 ; 5]", "(0,5]", True), ("]0 ; 5]", "[0,5]", False),
        ("]-\\infty ; 4[", "(-\\infty,4)", True), ("[1;3[", "[1,3)", True), ("[1;3[", "[1,3]", False),
        ("]-\\infty;0[\\cup]2;+\\infty[", "(-\\infty,0)\\cup(2,\\infty)", True),
        ("\\{2, 4, \\ldots, 12\\}", "\\{2,4,6,8,10,12\\}", True), ("\\{2, 4, \\ldots, 12\\}", "\\{2,4,6,8,10\\}", False),
        ("3, 6, 9, \\dots, 15", "3,6,9,12,15", True), ("1, 3, 9, ..., 81", "1,3,9,27,81", True),
        ("1, 3, 9, ..., 81", "1,3,9,27", False), ("1, 2, \\ldots", "1,2", False),
    ],
    # ---- a point, vector or set with its name; a solution set of one tuple ------------------------------------------
    "named_objects": [
        ("Q(-3, 8)", "(-3,8)", True), ("Q(-3, 8)", "(8,-3)", False), ("Q'(1, 0)", "(1,0)", True),
        ("\\vec{PQ} = (2, 0, -1)", "(2,0,-1)", True), ("\\vec{PQ} = (2, 0, 1)", "(2,0,-1)", False),
        ("I = (0, 4]", "(0,4]", True), ("I = (0, 4]", "[0,4]", False), ("\\{(-2, 9)\\}", "(-2,9)", True),
        ("\\{(-2, 9), (1, 1)\\}", "(-2,9)", False),
    ],
    # ---- relation signs by their Unicode variants; `~` and \simeq as "approximately"; an examiner's marks -------------
    "signs_and_marks": [
        ("t ⩽ 7", "t \\le 7", True), ("t ⩽ 7", "t \\ge 7", False), ("3\\pi ~ 9.42", "9.42", True),
        ("3\\pi ~ 9.42", "9.4", False), ("\\sqrt{10} \\simeq 3.162", "3.162", True), ("x = 4 (A1)", "4", True),
        ("x = 4 (M1) (A1) [2]", "4", True), ("x = 4 (A1)", "5", False), ("(A)", "A", True),
    ],
    # ---- a scalar factored out of a vector or matrix: the entries with the scalar multiplied in ---------------------
    "scalar_factored": [
        ("\\frac14(2, 6)", "(\\frac12, \\frac32)", True), ("\\frac14(2, 6)", "(2, 6)", False), ("(2, 6)/4", "(0.5, 1.5)", True),
        ("\\frac{1}{\\sqrt5}(1, 2)", "(\\frac{\\sqrt5}{5}, \\frac{2\\sqrt5}{5})", True), ("\\frac{1}{\\sqrt5}(2, 1)", "(\\frac{\\sqrt5}{5}, \\frac{2\\sqrt5}{5})", False),
        ("B^{-1} = \\frac{1}{3}\\begin{pmatrix}3 & 0 \\\\ -6 & 1\\end{pmatrix}", "\\begin{pmatrix}1 & 0\\\\-2 & \\frac13\\end{pmatrix}", True),
        ("-\\frac{1}{3}\\begin{pmatrix}3 & 0 \\\\ -6 & 1\\end{pmatrix}", "\\begin{pmatrix}1 & 0\\\\-2 & \\frac13\\end{pmatrix}", False),
        ("\\begin{pmatrix}1 & 0\\\\\\frac{-6}{3} & \\frac13\\end{pmatrix}", "\\begin{pmatrix}1 & 0\\\\-2 & \\frac13\\end{pmatrix}", True),
    ],
    # ---- special functions at constants with closed values; inverse hyperbolic functions -------------------------------
    "special_values": [
        ("\\Gamma(4)", "6", True), ("\\Gamma(4)", "24", False), ("\\Gamma\\left(\\frac32\\right)", "\\frac{\\sqrt\\pi}{2}", True),
        ("\\zeta(4)", "\\frac{\\pi^4}{90}", True), ("\\zeta(4)", "\\frac{\\pi^2}{6}", False), ("\\Gamma(0)", "0", False),
        ("\\cosh^{-1}(2)", "\\ln(2+\\sqrt3)", True), ("\\operatorname{artanh}\\frac12", "\\frac12\\ln 3", True),
        ("\\operatorname{artanh}\\frac12", "\\ln 3", False),
    ],
    # ---- a shape `a \times b` is its factors, never their product ---------------------------------------------------
    "dimensions": [
        ("9 \\times 4", "9\\times4", True), ("4 \\times 9", "9\\times4", True), ("9 \\text{ cm by } 4 \\text{ cm}", "9\\times4", True),
        ("36", "9\\times4", False), ("6 \\times 6", "9\\times4", False), ("12 \\times 3", "9\\times4", False),
        ("2 \\times 2 \\times 7", "2\\times2\\times7", True), ("4 \\times 7", "2\\times2\\times7", False),
        ("3.2 \\times 10^{4}", "3.2\\times10^4", True), ("32000", "3.2\\times10^4", True),
    ],
}

SYNTAX_RESPONSES = [
    # a shape stated "a by b" at the end of a statement is the shape, never its area
    ("The garden measures 9 ft by 4 ft.", "9\\times4", 1.0),
    ("The garden measures 9 ft by 4 ft.", "36", 0.0),
    ("The crate is 2 by 3 by 4.", "2\\times3\\times4", 1.0),
    ("The crate is 2 by 3 by 4.", "2\\times3\\times5", 0.0),
    ("Divide 36 by 4 to get 9.", "9", 1.0),
    # an interpreter session or a computer-algebra command: inputs dropped, outputs read as math
    (">>> from sympy import *\n>>> integrate(x**2, (x, 0, 3))\n9\n\nThe integral is 9.", "9", 1.0),
    (">>> from sympy import *\n>>> integrate(x**2, (x, 0, 3))\n9\n\nThe integral is 9.", "3", 0.0),
    (">>> import math\n>>> math.comb(6, 2)\n15", "15", 1.0),
    (">>> import math\n>>> math.comb(6, 2)\n15", "6", 0.0),
    ("In[1]:= Integrate[1/x^2, {x, 1, Infinity}]\nOut[1]= 1", "1", 1.0),
    ("In[1]:= Integrate[1/x^2, {x, 1, Infinity}]\nOut[1]= 1", "\\infty", 0.0),
    ("Factor[x^2 - 9] gives (x - 3) (x + 3).", "(x-3)(x+3)", 1.0),
    ("Factor[x^2 - 9] gives (x - 3) (x + 3).", "(x-9)(x+1)", 0.0),
    ("```python\n>>> sqrt(50)\n5*sqrt(2)\n```\nSo it simplifies to 5*sqrt(2).", "5\\sqrt2", 1.0),
    ("```python\n>>> sqrt(50)\n5*sqrt(2)\n```\nSo it simplifies to 5*sqrt(2).", "2\\sqrt5", 0.0),
    # a decision about a hypothesis, in any words: the last deciding sentence, its negation, the alternative's opposite
    ("The test statistic 3.1 exceeds 2.58, hence $H_0$ is rejected at the 1% level.", "Reject $H_0$", 1.0),
    ("The test statistic 3.1 exceeds 2.58, hence $H_0$ is rejected at the 1% level.", "Fail to reject $H_0$", 0.0),
    ("With p = 0.4 we cannot reject the null hypothesis.", "Fail to reject $H_0$", 1.0),
    ("With p = 0.4 we cannot reject the null hypothesis.", "Reject $H_0$", 0.0),
    ("p < 0.01, so the data support $H_a$: we accept the alternative.", "Reject $H_0$", 1.0),
    ("p > 0.05, so we retain $H_0$.", "Reject $H_0$", 0.0),
    ("At first I would reject $H_0$. On a second look the p-value is 0.08, so I do not reject it.", "Fail to reject $H_0$", 1.0),
    # a sentence that states a value, then revises it after "but": the revision, never the first value
    ("2000 + 18 = 2018, but since the first year counts, the answer is 2019.", "2018", 0.0),
    ("2000 + 18 = 2018, but since the first year counts, the answer is 2019.", "2019", 1.0),
    ("The base is $7 \\times 3$, so the box is 7 by 3 by 2.", "42", 0.0),
]

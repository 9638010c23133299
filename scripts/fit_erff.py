"""The polynomials of src/cpu/vmath.h's ts_erff, refitted: near-minimax fits
by Lawson's iteration (weighted least squares, each point's weight multiplied
by its error until the errors level) in 40-digit arithmetic (mpmath).

- P(t), t = x^2 on [0, 0.921875^2]: erf(x) = x + x P(x^2), degree 5, error
  weight 1 (the error of x P is relative to erf(x) ~ 1.13 x);
- Q(u), u = |x| - 1 on [0.921875, 4]: erf(|x|) = 1 - exp(-Q), degree 6, error
  weight erfc(|x|) / 2^-24 (Q's error moves erf by erfc times as much; 2^-24
  is an ulp of erf there), so the printed maximum is in ulps.

Prints each polynomial's coefficients (constant first) as float32 literals
and the fit's maximum weighted error. Run: /usr/bin/python3 scripts/fit_erff.py
(a few minutes). The float32 results were then checked over all 2^32 floats
against the float64 erf: at most 1.44 ulp without FMA, 1.22 with."""
import mpmath as mp
import numpy as np

mp.mp.dps = 40
SEAM = mp.mpf(0.921875)


def lawson(f, weight, lo, hi, degree, shift=0, points=300, rounds=40):
    xs = [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (i + 0.5) / points) for i in range(points)]
    ys, ws = [f(x) for x in xs], [weight(x) for x in xs]
    lw = [mp.mpf(1) / points] * points
    for _ in range(rounds):
        A, b = mp.matrix(points, degree + 1), mp.matrix(points, 1)
        for i, x in enumerate(xs):
            s = mp.sqrt(lw[i]) * ws[i]
            for j in range(degree + 1):
                A[i, j] = s * (x - shift) ** j
            b[i] = s * ys[i]
        c = mp.qr_solve(A, b)[0]
        err = [abs(ws[i] * (sum(c[j] * (xs[i] - shift) ** j for j in range(degree + 1)) - ys[i]))
               for i in range(points)]
        total = sum(lw[i] * err[i] for i in range(points))
        lw = [lw[i] * err[i] / total for i in range(points)]
    return [c[j] for j in range(degree + 1)], max(err)


def erf_over_x_minus_1(t):
    if t == 0:
        return 2 / mp.sqrt(mp.pi) - 1
    r = mp.sqrt(t)
    return mp.erf(r) / r - 1


def show(name, coeffs, err):
    print("%s (max weighted error %s):" % (name, mp.nstr(err, 4)))
    print("  " + ", ".join("%.9ef" % np.float32(float(v)) for v in coeffs))


show("P(x^2)", *lawson(erf_over_x_minus_1, lambda t: 1, mp.mpf(0), SEAM ** 2, 5, points=200))
show("Q(|x| - 1), in ulps", *lawson(lambda a: -mp.log(mp.erfc(a)), lambda a: mp.erfc(a) / mp.mpf(2) ** -24,
                                    SEAM, mp.mpf(4), 6, shift=1, points=150, rounds=30))

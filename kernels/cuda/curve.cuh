// G1 (over Fq) and G2 (over Fq2) of BLS12-381: y^2 = x^3 + b, a = 0.
//
// Affine points as the host uploads them: x then y in Montgomery form; the
// identity is encoded as x = y = 0 (not on the curve, since b != 0).
// Jacobian points (X, Y, Z) mean (X/Z^2, Y/Z^3), the same coordinates as
// arkworks' `Projective`; the identity has Z = 0.
#pragma once
#include "field.cuh"

template <class F>
struct Affine {
    F x, y;
    DEV bool is_inf() const { return x.is_zero() && y.is_zero(); }
};

template <class F>
struct Jacobian {
    F X, Y, Z;

    static DEV Jacobian inf() {
        Jacobian r;
        r.X = F::one();
        r.Y = F::one();
        r.Z = F::zero();
        return r;
    }
    static DEV Jacobian from_affine(const Affine<F>& a) {
        if (a.is_inf()) return inf();
        Jacobian r;
        r.X = a.x;
        r.Y = a.y;
        r.Z = F::one();
        return r;
    }
    DEV bool is_inf() const { return Z.is_zero(); }

    // dbl-2009-l
    DEV Jacobian dbl() const {
        if (is_inf()) return *this;
        F A = X.sqr();
        F B = Y.sqr();
        F C = B.sqr();
        F D = (X + B).sqr() - A - C;
        D = D.dbl();
        F E = A.dbl() + A;
        F Fv = E.sqr();
        Jacobian r;
        r.X = Fv - D.dbl();
        F C8 = C.dbl().dbl().dbl();
        r.Y = E * (D - r.X) - C8;
        r.Z = (Y * Z).dbl();
        return r;
    }

    // madd-2007-bl: this + affine q
    DEV Jacobian add_affine(const Affine<F>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F Z1Z1 = Z.sqr();
        F U2 = q.x * Z1Z1;
        F S2 = q.y * Z * Z1Z1;
        F H = U2 - X;
        F rr = S2 - Y;
        if (H.is_zero()) {
            if (rr.is_zero()) return from_affine(q).dbl();
            return inf();
        }
        rr = rr.dbl();
        F HH = H.sqr();
        F I = HH.dbl().dbl();
        F J = H * I;
        F V = X * I;
        Jacobian r;
        r.X = rr.sqr() - J - V.dbl();
        r.Y = rr * (V - r.X) - (Y * J).dbl();
        r.Z = (Z + H).sqr() - Z1Z1 - HH;
        return r;
    }

    // add-2007-bl
    DEV Jacobian add(const Jacobian& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        F Z1Z1 = Z.sqr();
        F Z2Z2 = q.Z.sqr();
        F U1 = X * Z2Z2;
        F U2 = q.X * Z1Z1;
        F S1 = Y * q.Z * Z2Z2;
        F S2 = q.Y * Z * Z1Z1;
        F H = U2 - U1;
        F rr = S2 - S1;
        if (H.is_zero()) {
            if (rr.is_zero()) return dbl();
            return inf();
        }
        rr = rr.dbl();
        F H2 = H.dbl();
        F I = H2.sqr();
        F J = H * I;
        F V = U1 * I;
        Jacobian r;
        r.X = rr.sqr() - J - V.dbl();
        r.Y = rr * (V - r.X) - (S1 * J).dbl();
        r.Z = ((Z + q.Z).sqr() - Z1Z1 - Z2Z2) * H;
        return r;
    }

    // this * k for a small non-negative integer k (double-and-add, MSB first).
    DEV Jacobian mul_small(uint32_t k) const {
        Jacobian r = inf();
        for (int i = 31; i >= 0; i--) {
            r = r.dbl();
            if ((k >> i) & 1) r = r.add(*this);
        }
        return r;
    }
};

typedef Affine<Fq> G1Affine;
typedef Jacobian<Fq> G1Jac;
typedef Affine<Fq2> G2Affine;
typedef Jacobian<Fq2> G2Jac;

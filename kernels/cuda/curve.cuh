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
    DEV Jacobian to_jacobian() const { return *this; }  // as XYZZ's, for msm_level0

    // dbl-2009-l, Z3 first so that Y and Z die early (see add_affine).
    DEV Jacobian dbl() const {
        if (is_inf()) return *this;
        Jacobian r;
        r.Z = (Y * Z).dbl();
        F B = Y.sqr();
        F A = X.sqr();
        F C = B.sqr();
        F D = (X + B).sqr() - A - C;
        D = D.dbl();
        F E = A.dbl() + A;
        r.X = E.sqr() - D.dbl();
        r.Y = E * (D - r.X) - C.dbl().dbl().dbl();
        return r;
    }

    // madd-2007-bl: this + affine q. Written in the order that ends each
    // temporary's life soonest: the Fq products are out-of-line calls, which
    // ptxas does not move, so source order is the schedule, and everything
    // live across a call must sit in a register or spill (G2 at 255).
    DEV Jacobian add_affine(const Affine<F>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F Z1Z1 = Z.sqr();
        F H = q.x * Z1Z1 - X;
        F rr = q.y * Z * Z1Z1 - Y;
        F HH = H.sqr();
        Jacobian r;
        r.Z = (Z + H).sqr() - Z1Z1 - HH;
        if (H.is_zero()) {
            if (rr.is_zero()) return from_affine(q).dbl();
            return inf();
        }
        rr = rr.dbl();
        F I = HH.dbl().dbl();
        F J = H * I;
        F V = X * I;
        r.X = rr.sqr() - J - V.dbl();
        // rr(V - X3) - 2 Y J with one reduction per Fq sum of products.
        r.Y = F::dot(rr, V - r.X, Y.dbl().neg(), J);
        return r;
    }

    // add-2007-bl, ordered as add_affine. The P = Q case doubles q (the same
    // point), so this point's coordinates die as soon as they are consumed.
    DEV Jacobian add(const Jacobian& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        F Z2Z2 = q.Z.sqr();
        F U1 = X * Z2Z2;
        F S1 = Y * q.Z * Z2Z2;
        F Z1Z1 = Z.sqr();
        F Zs = (Z + q.Z).sqr() - Z1Z1 - Z2Z2;
        F H = q.X * Z1Z1 - U1;
        F rr = q.Y * Z * Z1Z1 - S1;
        if (H.is_zero()) {
            if (rr.is_zero()) return q.dbl();
            return inf();
        }
        Jacobian r;
        r.Z = Zs * H;
        rr = rr.dbl();
        F I = H.dbl().sqr();
        F J = H * I;
        F V = U1 * I;
        r.X = rr.sqr() - J - V.dbl();
        r.Y = F::dot(rr, V - r.X, S1.dbl().neg(), J);
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

// XYZZ coordinates (X, Y, ZZ, ZZZ) mean (X/ZZ, Y/ZZZ) with ZZ^3 = ZZZ^2 (ZZ =
// Z^2, ZZZ = Z^3 for some Z); the identity has ZZ = ZZZ = 0. G1's bucket
// level adds affine points into them: a mixed addition (madd-2008-s) is
// 8M + 2S and 7 additions, where Jacobian's madd-2007-bl is 7M + 4S and about
// 12, and the level converts to Jacobian once per work item (G1 MSM -9%,
// docs/gpu.md run 19). G2 stays Jacobian: there a squaring costs 2 Fq
// products against a product's 3, so XYZZ saves only 1 of 29, and with a
// fourth Fq2 coordinate held at 255 registers it measured 4% slower.
template <class F>
struct XYZZ {
    F X, Y, ZZ, ZZZ;

    static DEV XYZZ inf() {
        XYZZ r;
        r.X = F::one();
        r.Y = F::one();
        r.ZZ = F::zero();
        r.ZZZ = F::zero();
        return r;
    }
    DEV bool is_inf() const { return ZZ.is_zero(); }

    // 2q for an affine q that is not the identity (mdbl-2008-s-1, a = 0).
    static DEV XYZZ dbl_affine(const Affine<F>& q) {
        F U = q.y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = q.x * V;
        F XX = q.x.sqr();
        F M = XX.dbl() + XX;
        XYZZ r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * q.y;
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }

    // madd-2008-s: this + affine q, with the q = this and q = -this cases.
    DEV XYZZ add_affine(const Affine<F>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) {
            XYZZ r;
            r.X = q.x;
            r.Y = q.y;
            r.ZZ = F::one();
            r.ZZZ = F::one();
            return r;
        }
        F P = q.x * ZZ - X;
        F R = q.y * ZZZ - Y;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl_affine(q);
            return inf();
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = X * PP;
        XYZZ r;
        r.X = R.sqr() - PPP - Q.dbl();
        // R(Q - X3) - Y PPP with one reduction for both products.
        r.Y = F::dot(R, Q - r.X, Y.neg(), PPP);
        r.ZZ = ZZ * PP;
        r.ZZZ = ZZZ * PPP;
        return r;
    }

    // The same point in Jacobian coordinates: Jacobian's Z = ZZZ / ZZ, scaled
    // by ZZ (any scale names the same point) gives Z = ZZZ, X = X * ZZ^2,
    // Y = Y * ZZZ^2; no inversion.
    DEV Jacobian<F> to_jacobian() const {
        if (is_inf()) return Jacobian<F>::inf();
        Jacobian<F> r;
        r.X = X * ZZ.sqr();
        r.Y = Y * ZZZ.sqr();
        r.Z = ZZZ;
        return r;
    }
};

typedef Affine<Fq> G1Affine;
typedef Jacobian<Fq> G1Jac;
typedef Affine<Fq2> G2Affine;
typedef Jacobian<Fq2> G2Jac;

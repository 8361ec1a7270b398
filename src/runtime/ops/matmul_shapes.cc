#include "runtime/ops/matmul_shapes.h"

#include "runtime/ops/indexing.h"

namespace mf::runtime::ops {

StatusOr<GemmShape> PlanGemm(const Shape& a, const Shape& b, bool trans_a, bool trans_b) {
  if (a.size() != 2 || b.size() != 2) {
    return InvalidArgument("Gemm needs 2-D A and B, got " + ShapeToString(a) + " and " + ShapeToString(b));
  }
  GemmShape g;
  g.m = trans_a ? a[1] : a[0];
  g.k = trans_a ? a[0] : a[1];
  int64_t kb = trans_b ? b[1] : b[0];
  g.n = trans_b ? b[0] : b[1];
  if (g.k != kb) return InvalidArgument("Gemm inner dims differ: A " + ShapeToString(a) + ", B " + ShapeToString(b));
  return g;
}

Status CheckGemmC(const Shape& c, int64_t m, int64_t n) {
  Shape out{m, n};
  MF_ASSIGN_OR_RETURN(Shape broadcast, BroadcastShapes(c, out));
  if (broadcast != out) return InvalidArgument("Gemm C of shape " + ShapeToString(c) + " does not broadcast to [M, N]");
  return Status::Ok();
}

StatusOr<MatMulShape> PlanMatMul(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) return InvalidArgument("MatMul inputs must be at least 1-D");
  Shape sa = a, sb = b;
  bool drop_m = sa.size() == 1, drop_n = sb.size() == 1;
  if (drop_m) sa.insert(sa.begin(), 1);
  if (drop_n) sb.push_back(1);
  MatMulShape s;
  s.m = sa[sa.size() - 2];
  s.k = sa.back();
  s.n = sb.back();
  if (s.k != sb[sb.size() - 2])
    return InvalidArgument("MatMul inner dims differ: " + ShapeToString(a) + " x " + ShapeToString(b));
  s.batch_a.assign(sa.begin(), sa.end() - 2);
  s.batch_b.assign(sb.begin(), sb.end() - 2);
  MF_ASSIGN_OR_RETURN(s.batch, BroadcastShapes(s.batch_a, s.batch_b));
  s.out = s.batch;
  if (!drop_m) s.out.push_back(s.m);
  if (!drop_n) s.out.push_back(s.n);
  return s;
}

}  // namespace mf::runtime::ops

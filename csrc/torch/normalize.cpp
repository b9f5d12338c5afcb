// softmax, log_softmax and their backwards, cross_entropy, layer_norm and rms_norm: torch's checks
// and type rules, shared by the CPU and CUDA kernels (reduce_common.h's Prepared* structs).
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <cfloat>

#include <vector>

#include "reduce_common.h"

namespace treduce {
namespace {

const char* softmax_name(SoftmaxOp op) {
  switch (op) {
    case SoftmaxOp::Softmax: return "softmax";
    case SoftmaxOp::LogSoftmax: return "log_softmax";
    case SoftmaxOp::SoftmaxBackward: return "softmax_backward";
    case SoftmaxOp::LogSoftmaxBackward: return "log_softmax_backward";
  }
  return "softmax";
}

// (outer, size, inner) of a contiguous tensor around dim (a 0-dim tensor is one element).
void set_dims(NormalizeArgs& a, const at::Tensor& x, int64_t dim) {
  a.outer = 1, a.size = 1, a.inner = 1;
  if (x.dim() == 0) return;
  for (int64_t d = 0; d < dim; ++d) a.outer *= x.size(d);
  a.size = x.size(dim);
  for (int64_t d = dim + 1; d < x.dim(); ++d) a.inner *= x.size(d);
}

// The accumulator's dtype of cross_entropy's logsumexp and sums.
at::ScalarType xent_acc(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

// The shared checks and shapes of cross_entropy's forward and backward.
void xent_common(PreparedCrossEntropy& p, const at::Tensor& self, const at::Tensor& target,
                 const std::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                 double label_smoothing) {
  TORCH_CHECK(is_floating(self.scalar_type()), "cross_entropy: expected floating-point logits, got ",
              c10::toString(self.scalar_type()));
  TORCH_CHECK(target.scalar_type() == at::kLong, "cross_entropy: expected class-index targets of type Long, got ",
              c10::toString(target.scalar_type()), " (class probabilities: torch's F.cross_entropy)");
  TORCH_CHECK(self.dim() >= 1, "cross_entropy: expected logits of 1 or more dims, got a 0-dim tensor");
  TORCH_CHECK(reduction >= 0 && reduction <= 2, "cross_entropy: reduction ", reduction, " is not 0 (none), 1 (mean) or 2 (sum)");
  TORCH_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
              "label_smoothing must be between 0.0 and 1.0. Got: ", label_smoothing);
  TORCH_CHECK(target.device() == self.device(), "cross_entropy: target on ", target.device(), ", logits on ", self.device());
  const int64_t class_dim = self.dim() == 1 ? 0 : 1;
  std::vector<int64_t> want;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != class_dim) want.push_back(self.size(d));
  TORCH_CHECK(target.sizes() == at::IntArrayRef(want), "cross_entropy: expected target size ", at::IntArrayRef(want),
              ", got ", target.sizes());
  const int64_t classes = self.size(class_dim);
  if (weight && weight->defined()) {
    TORCH_CHECK(weight->dim() == 1 && weight->numel() == classes, "cross_entropy: expected a weight of ", classes,
                " elements (one a class), got shape ", weight->sizes());
    TORCH_CHECK(weight->scalar_type() == self.scalar_type(), "cross_entropy: expected a weight of the logits' dtype ",
                c10::toString(self.scalar_type()), ", got ", c10::toString(weight->scalar_type()));
    TORCH_CHECK(weight->device() == self.device(), "cross_entropy: weight on ", weight->device(), ", logits on ",
                self.device());
    p.weight = weight->contiguous();
  }
  p.x = self.contiguous();
  p.target = target.contiguous();
  CrossEntropyArgs& a = p.args;
  a.dtype = dtype_of_scalar(self.scalar_type());
  a.x = p.x.const_data_ptr();
  a.target = p.target.const_data_ptr<int64_t>();
  a.weight = p.weight.defined() ? p.weight.const_data_ptr() : nullptr;
  a.outer = self.dim() == 1 ? 1 : self.size(0);
  a.classes = classes;
  a.inner = 1;
  for (int64_t d = 2; d < self.dim(); ++d) a.inner *= self.size(d);
  a.ignore_index = ignore_index;
  a.smoothing = label_smoothing;
  a.reduction = LossReduction(reduction);
}

const char* norm_name(NormKind kind) { return kind == NormKind::Layer ? "layer_norm" : "rms_norm"; }

// The shared checks of layer_norm's and rms_norm's forward and backward: the input's last dims
// are normalized_shape; weight and bias that shape, of the input's dtype and device. Sets rows
// and cols, the contiguous input, weight and bias.
void norm_common(PreparedLayerNorm& p, NormKind kind, const at::Tensor& input, at::IntArrayRef shape,
                 const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias) {
  const char* name = norm_name(kind);
  TORCH_CHECK(!shape.empty(), "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
              "element, but got normalized_shape = ", shape);
  const int64_t k = int64_t(shape.size()), axis = input.dim() - k;
  TORCH_CHECK(axis >= 0 && input.sizes().slice(axis) == shape, "Given normalized_shape=", shape,
              ", expected input with shape [*, ", c10::Join(", ", shape), "], but got input of size", input.sizes());
  TORCH_CHECK(is_floating(input.scalar_type()), name, ": expected a floating-point input (float16, bfloat16, float32, "
              "float64), got ", c10::toString(input.scalar_type()));
  const auto take = [&](const std::optional<at::Tensor>& t, const char* what, at::Tensor& into) {
    if (!t || !t->defined()) return;
    TORCH_CHECK(t->sizes() == shape, "Expected ", what, " to be of same shape as normalized_shape, but got ", what,
                " of shape ", t->sizes(), " and normalized_shape = ", shape);
    TORCH_CHECK(t->scalar_type() == input.scalar_type(), name, ": expected a ", what, " of the input's dtype ",
                c10::toString(input.scalar_type()), ", got ", c10::toString(t->scalar_type()));
    TORCH_CHECK(t->device() == input.device(), name, ": ", what, " on ", t->device(), ", input on ", input.device());
    into = t->contiguous();
  };
  take(weight, "weight", p.weight);
  take(bias, "bias", p.bias);
  p.x = input.contiguous();
  LayerNormArgs& a = p.args;
  a.kind = kind;
  a.dtype = dtype_of_scalar(input.scalar_type());
  a.cols = c10::multiply_integers(shape);
  a.rows = c10::multiply_integers(input.sizes().slice(0, axis));
  a.x = p.x.const_data_ptr();
  a.weight = p.weight.defined() ? p.weight.const_data_ptr() : nullptr;
  a.bias = p.bias.defined() ? p.bias.const_data_ptr() : nullptr;
  p.empty = a.rows == 0 || a.cols == 0;
}

// The statistics' shape: input.shape[:-k] + [1] * k.
std::vector<int64_t> stats_shape(const at::Tensor& input, int64_t k) {
  std::vector<int64_t> s(input.sizes().begin(), input.sizes().end());
  for (int64_t d = input.dim() - k; d < input.dim(); ++d) s[d] = 1;
  return s;
}

}  // namespace

PreparedLayerNorm prepare_layer_norm(NormKind kind, const at::Tensor& input, at::IntArrayRef normalized_shape,
                                     const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                     std::optional<double> eps) {
  PreparedLayerNorm p;
  norm_common(p, kind, input, normalized_shape, weight, bias);
  LayerNormArgs& a = p.args;
  const at::ScalarType acc = xent_acc(input.scalar_type());
  // rms_norm's default eps: the machine epsilon of its accumulator, as torch's.
  a.eps = eps ? *eps : acc == at::kDouble ? DBL_EPSILON : double(FLT_EPSILON);
  p.y = at::empty(p.x.sizes(), p.x.options());
  const std::vector<int64_t> shape = stats_shape(input, int64_t(normalized_shape.size()));
  const at::TensorOptions opts = p.x.options().dtype(acc);
  if (a.cols == 0) {
    // (no element: mean 0 and rstd 1 / sqrt(0 / 0 + eps), NaN, as torch's)
    if (kind == NormKind::Layer) p.mean = at::zeros(shape, opts);
    p.rstd = at::full(shape, std::numeric_limits<double>::quiet_NaN(), opts);
  } else {
    if (kind == NormKind::Layer) p.mean = at::empty(shape, opts);
    p.rstd = at::empty(shape, opts);
  }
  a.y = p.y.mutable_data_ptr();
  a.mean = p.mean.defined() ? p.mean.mutable_data_ptr() : nullptr;
  a.rstd = p.rstd.mutable_data_ptr();
  return p;
}

PreparedLayerNorm prepare_layer_norm_backward(NormKind kind, const at::Tensor& grad, const at::Tensor& input,
                                              at::IntArrayRef normalized_shape, const at::Tensor& mean,
                                              const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                              const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  const char* name = norm_name(kind);
  PreparedLayerNorm p;
  norm_common(p, kind, input, normalized_shape, weight, bias);
  LayerNormArgs& a = p.args;
  TORCH_CHECK(grad.sizes() == input.sizes(), name, "_backward: grad_out of shape ", grad.sizes(),
              " and input of shape ", input.sizes(), " differ");
  TORCH_CHECK(grad.device() == input.device(), name, "_backward: grad_out and input on different devices");
  const at::ScalarType acc = xent_acc(input.scalar_type());
  const auto stats = [&](const at::Tensor& t, const char* what) {
    TORCH_CHECK(t.numel() == a.rows && t.device() == input.device(), name, "_backward: expected ", what, " of ",
                a.rows, " elements (one a row) on ", input.device(), ", got ", t.sizes(), " on ", t.device());
    return t.to(acc).contiguous();
  };
  if (kind == NormKind::Layer) p.mean = stats(mean, "mean");
  p.rstd = stats(rstd, "rstd");
  p.grad = grad.to(input.scalar_type()).contiguous();
  a.grad = p.grad.const_data_ptr();
  a.mean = p.mean.defined() ? const_cast<void*>(p.mean.const_data_ptr()) : nullptr;
  a.rstd = const_cast<void*>(p.rstd.const_data_ptr());
  if (mask[0]) {
    p.grad_x = at::empty(p.x.sizes(), p.x.options());
    a.grad_x = p.grad_x.mutable_data_ptr();
  }
  // dw and db start at 0 where no row adds to them.
  const auto param = [&](bool wanted, at::Tensor& into, void*& ptr) {
    if (!wanted) return;
    into = p.empty ? at::zeros(normalized_shape, p.x.options()) : at::empty(normalized_shape, p.x.options());
    ptr = into.mutable_data_ptr();
  };
  param(mask[1] && p.weight.defined(), p.grad_weight, a.grad_weight);
  param(mask[2] && p.bias.defined() && kind == NormKind::Layer, p.grad_bias, a.grad_bias);
  return p;
}

PreparedCrossEntropy prepare_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                           const std::optional<at::Tensor>& weight, int64_t reduction,
                                           int64_t ignore_index, double label_smoothing, bool check_targets) {
  PreparedCrossEntropy p;
  xent_common(p, self, target, weight, reduction, ignore_index, label_smoothing);
  CrossEntropyArgs& a = p.args;
  if (check_targets) {
    const int64_t* t = a.target;
    for (int64_t s = 0; s < p.target.numel(); ++s)
      TORCH_CHECK_INDEX(t[s] == ignore_index || (t[s] >= 0 && t[s] < a.classes), "Target ", t[s], " is out of bounds.");
  }
  const at::TensorOptions acc = self.options().dtype(xent_acc(self.scalar_type()));
  p.lse = at::empty(p.target.sizes(), acc);
  p.total_weight = at::zeros({}, acc);
  a.lse = p.lse.mutable_data_ptr();
  a.total_weight = p.total_weight.mutable_data_ptr();
  if (a.reduction == LossReduction::None) {
    p.loss = at::empty(p.target.sizes(), self.options());
  } else {
    p.loss = at::empty({}, self.options());
    p.workspace = at::empty({2, p.target.numel()}, acc);
    a.sample_loss = p.workspace.mutable_data_ptr();
    a.sample_weight = static_cast<char*>(a.sample_loss) + p.target.numel() * p.workspace.element_size();
  }
  a.loss = p.loss.mutable_data_ptr();
  return p;
}

PreparedCrossEntropy prepare_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& self,
                                                    const at::Tensor& target, const std::optional<at::Tensor>& weight,
                                                    int64_t reduction, int64_t ignore_index, double label_smoothing,
                                                    const at::Tensor& lse, const at::Tensor& total_weight) {
  PreparedCrossEntropy p;
  xent_common(p, self, target, weight, reduction, ignore_index, label_smoothing);
  const at::ScalarType acc = xent_acc(self.scalar_type());
  TORCH_CHECK(lse.scalar_type() == acc && lse.numel() == p.target.numel() && total_weight.scalar_type() == acc &&
                  total_weight.numel() == 1,
              "cross_entropy_backward: lse and total_weight are not cross_entropy_forward's of these logits");
  const int64_t expected = reduction == 0 ? p.target.numel() : 1;
  TORCH_CHECK(grad.numel() == expected, "cross_entropy_backward: expected a gradient of ", expected,
              " elements, got ", grad.numel());
  p.grad = grad.to(self.scalar_type()).contiguous();
  p.lse = lse.contiguous();
  p.total_weight = total_weight.contiguous();
  p.grad_x = at::empty(p.x.sizes(), p.x.options());
  CrossEntropyArgs& a = p.args;
  a.grad = p.grad.const_data_ptr();
  a.lse = const_cast<void*>(p.lse.const_data_ptr());
  a.total_weight = const_cast<void*>(p.total_weight.const_data_ptr());
  a.grad_x = p.grad_x.mutable_data_ptr();
  return p;
}

PreparedSoftmax prepare_softmax(SoftmaxOp op, const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {
  const char* name = softmax_name(op);
  dim = c10::maybe_wrap_dim(dim, self.dim());
  const at::ScalarType out_type = dtype.value_or(self.scalar_type());
  PreparedSoftmax p;
  p.x = self;
  if (out_type != self.scalar_type() &&
      !(is_floating(self.scalar_type()) && is_floating(out_type) &&
        normalize_pair(op, dtype_of_scalar(self.scalar_type()), dtype_of_scalar(out_type))))
    p.x = self.to(out_type);  // as torch.softmax(x, dtype=): the input converted first
  TORCH_CHECK(is_floating(p.x.scalar_type()) && is_floating(out_type), name,
              ": expected a floating-point input and result (float16, bfloat16, float32, float64), got ",
              c10::toString(p.x.scalar_type()), " and ", c10::toString(out_type));
  p.x = p.x.contiguous();
  p.out = at::empty(p.x.sizes(), p.x.options().dtype(out_type));
  p.args.op = op;
  p.args.in = dtype_of_scalar(p.x.scalar_type());
  p.args.out = dtype_of_scalar(out_type);
  p.args.x = p.x.const_data_ptr();
  p.args.out_data = p.out.mutable_data_ptr();
  set_dims(p.args, p.x, dim);
  return p;
}

PreparedSoftmax prepare_softmax_backward(SoftmaxOp op, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                         at::ScalarType input_dtype) {
  const char* name = softmax_name(op);
  TORCH_CHECK(grad.sizes() == output.sizes(), name, ": grad_output of shape ", grad.sizes(),
              " and output of shape ", output.sizes(), " differ");
  TORCH_CHECK(grad.device() == output.device(), name, ": grad_output and output on different devices");
  TORCH_CHECK(is_floating(output.scalar_type()) && is_floating(input_dtype), name,
              ": expected floating-point tensors (float16, bfloat16, float32, float64), got ",
              c10::toString(output.scalar_type()), " and input_dtype ", c10::toString(input_dtype));
  dim = c10::maybe_wrap_dim(dim, output.dim());
  PreparedSoftmax p;
  p.y = output.contiguous();
  p.x = (grad.scalar_type() == output.scalar_type() ? grad : grad.to(output.scalar_type())).contiguous();
  const DType in = dtype_of_scalar(output.scalar_type());
  DType out = dtype_of_scalar(input_dtype);
  if (!normalize_pair(op, in, out)) {
    p.convert_to = input_dtype;  // computed in the output's dtype, then converted
    out = in;
  }
  p.out = at::empty(p.y.sizes(), p.y.options().dtype(to_scalar_type(out)));
  p.args.op = op;
  p.args.in = in;
  p.args.out = out;
  p.args.x = p.x.const_data_ptr();
  p.args.y = p.y.const_data_ptr();
  p.args.out_data = p.out.mutable_data_ptr();
  set_dims(p.args, p.y, dim);
  return p;
}

}  // namespace treduce

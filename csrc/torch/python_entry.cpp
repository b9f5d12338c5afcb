// torch_reduce._C as a Python module: the eager entry of the ops' Python wrappers.
//
// Through torch.ops, a call spends about a microsecond in torch's generic argument parser
// (each argument converted by schema, defaults included) and in the OpOverload's Python frame:
// as much as the rest of a small reduction's host path, and more than torch.sum's generated
// parser costs. Here torch_reduce.sum(x, dim, keepdim, dtype=) and its kin reach the same op,
// through the same dispatcher (autograd, inference mode, functorch and every dispatch key as
// before), having parsed only what such a call can carry (the variant is "auto").
//
// This entry takes only plain eager calls: a torch.Tensor or nn.Parameter (not a subclass, which
// may override __torch_function__) on the CPU or a GPU, no torch function or dispatch mode
// active, dims as an int or a list or tuple of ints, keepdim a bool, a dtype torch_reduce takes,
// a correction or order as an int or a float. Anything else returns
// NotImplemented and the wrapper calls through torch.ops, as does an error: the call is then
// repeated there, so that it raises exactly what torch.ops raises (the ops are pure, so the
// repeat changes nothing but the time of a failing call). Warnings are handed to Python's
// warnings module as torch's own bindings hand them.
//
// The library stays abi3: only Python's limited API is used here. torch's Python-side helpers
// (torch/csrc/autograd/python_variable.h) need the full API, so the tensor comes in through its
// public `_cdata` (the address of its TensorImpl) and goes out through THPVariable_Wrap, declared
// below as libtorch_python exports it.
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "treduce.h"

// libtorch_python: a Python tensor for a result (the same object torch's own bindings return).
PyObject* THPVariable_Wrap(at::TensorBase&& var);

namespace treduce {
namespace {

// What a row's op takes as `dim`: a list (int[1]?), a list it requires (logsumexp's int[1]), one
// int (int?), or one int it requires (max and min over a dim).
enum class DimKind { kList, kRequiredList, kInt, kRequiredInt };

struct Results {
  at::Tensor first, second;  // second: defined for the ops with two results
};

// A call's arguments: the row's op takes the others at the schema's defaults.
struct Args {
  const at::Tensor& x;
  at::OptionalIntArrayRef dim;
  bool keepdim;
  std::optional<at::ScalarType> dtype;  // rows with kDtype
  std::optional<at::Scalar> scalar;     // rows with kScalar: var's correction, vector_norm's order
};

// What a row takes besides dim and keepdim.
enum Takes : unsigned { kNothing = 0, kDtype = 1, kScalar = 2 };

std::optional<int64_t> one_dim(at::OptionalIntArrayRef dim) {
  return dim.has_value() ? std::optional<int64_t>((*dim)[0]) : std::nullopt;
}

// The two results of var_mean, std_mean, aminmax, max and min.
Results both(std::tuple<at::Tensor, at::Tensor>&& r) { return {std::move(std::get<0>(r)), std::move(std::get<1>(r))}; }

// One row per op: its name (the module's constant), what its dim is, what else it takes, and
// the call through the C++ API (treduce.h: the same dispatcher handles; the variant "auto",
// vector_norm's order 2 unless given).
struct EagerOp {
  const char* name;
  DimKind dim;
  unsigned takes;
  Results (*call)(const Args&);
};

const EagerOp kEagerOps[] = {
    {"SUM", DimKind::kList, kDtype,
     [](const Args& a) -> Results { return {treduce::sum(a.x, "auto", a.dim, a.keepdim, a.dtype)}; }},
    {"MEAN", DimKind::kList, kDtype,
     [](const Args& a) -> Results { return {treduce::mean(a.x, a.dim, a.keepdim, a.dtype)}; }},
    {"AMAX", DimKind::kList, kNothing, [](const Args& a) -> Results { return {treduce::amax(a.x, a.dim, a.keepdim)}; }},
    {"AMIN", DimKind::kList, kNothing, [](const Args& a) -> Results { return {treduce::amin(a.x, a.dim, a.keepdim)}; }},
    {"VAR", DimKind::kList, kScalar,
     [](const Args& a) -> Results { return {treduce::var(a.x, a.dim, a.scalar, a.keepdim)}; }},
    {"STD", DimKind::kList, kScalar,
     [](const Args& a) -> Results { return {treduce::std(a.x, a.dim, a.scalar, a.keepdim)}; }},
    {"VAR_MEAN", DimKind::kList, kScalar,
     [](const Args& a) -> Results { return both(treduce::var_mean(a.x, a.dim, a.scalar, a.keepdim)); }},
    {"STD_MEAN", DimKind::kList, kScalar,
     [](const Args& a) -> Results { return both(treduce::std_mean(a.x, a.dim, a.scalar, a.keepdim)); }},
    {"NANSUM", DimKind::kList, kDtype,
     [](const Args& a) -> Results { return {treduce::nansum(a.x, a.dim, a.keepdim, a.dtype)}; }},
    {"NANMEAN", DimKind::kList, kDtype,
     [](const Args& a) -> Results { return {treduce::nanmean(a.x, a.dim, a.keepdim, a.dtype)}; }},
    {"LOGSUMEXP", DimKind::kRequiredList, kNothing,
     [](const Args& a) -> Results { return {treduce::logsumexp(a.x, *a.dim, a.keepdim)}; }},
    {"PROD", DimKind::kInt, kDtype,
     [](const Args& a) -> Results { return {treduce::prod(a.x, one_dim(a.dim), a.keepdim, a.dtype)}; }},
    {"VECTOR_NORM", DimKind::kList, kDtype | kScalar,
     [](const Args& a) -> Results {
       return {treduce::vector_norm(a.x, a.scalar.value_or(at::Scalar(2)), a.dim, a.keepdim, a.dtype)};
     }},
    {"ANY", DimKind::kList, kNothing, [](const Args& a) -> Results { return {treduce::any(a.x, a.dim, a.keepdim)}; }},
    {"ALL", DimKind::kList, kNothing, [](const Args& a) -> Results { return {treduce::all(a.x, a.dim, a.keepdim)}; }},
    {"COUNT_NONZERO", DimKind::kList, kNothing,
     [](const Args& a) -> Results {
       if (a.keepdim) throw std::invalid_argument("count_nonzero takes no keepdim");  // redone by torch.ops
       return {treduce::count_nonzero(a.x, a.dim)};
     }},
    {"ARGMAX", DimKind::kInt, kNothing,
     [](const Args& a) -> Results { return {treduce::argmax(a.x, one_dim(a.dim), a.keepdim)}; }},
    {"ARGMIN", DimKind::kInt, kNothing,
     [](const Args& a) -> Results { return {treduce::argmin(a.x, one_dim(a.dim), a.keepdim)}; }},
    // Through torch.ops these three cost an eager loop 1.5-4 us a call more than torch.aminmax,
    // torch.max and torch.min (H200, random shapes seed 77813: 9 of the 23 cases slower than
    // torch eager in an eager loop).
    {"AMINMAX", DimKind::kInt, kNothing,
     [](const Args& a) -> Results { return both(treduce::aminmax(a.x, one_dim(a.dim), a.keepdim)); }},
    {"MAX", DimKind::kRequiredInt, kNothing,
     [](const Args& a) -> Results { return both(treduce::max(a.x, (*a.dim)[0], a.keepdim)); }},
    {"MIN", DimKind::kRequiredInt, kNothing,
     [](const Args& a) -> Results { return both(treduce::min(a.x, (*a.dim)[0], a.keepdim)); }},
};
constexpr Py_ssize_t kEagerOpCount = sizeof(kEagerOps) / sizeof(kEagerOps[0]);

// torch.Tensor and torch.nn.Parameter (whose __torch_function__ is disabled, so torch's own
// parsers treat it as a tensor), set by _init; and the attribute that gives a tensor's address.
PyObject* tensor_type = nullptr;
PyObject* parameter_type = nullptr;
PyObject* cdata_name = nullptr;

// An exact Python int as int64; false for anything else (bool, a SymInt, an int out of range).
bool exact_int(PyObject* obj, int64_t& out) {
  if (!PyLong_CheckExact(obj)) return false;
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  out = value;
  return true;
}

// The dtypes a call may name (dtype=), in the order of torch_reduce.SUPPORTED_DTYPES, whose
// torch.dtype objects _init hands over.
constexpr at::ScalarType kDtypes[] = {at::kBool, at::kByte,     at::kChar,     at::kShort, at::kInt,
                                      at::kLong, at::kHalf,     at::kBFloat16, at::kFloat, at::kDouble};
constexpr Py_ssize_t kDtypeCount = sizeof(kDtypes) / sizeof(kDtypes[0]);
PyObject* dtype_objects[kDtypeCount] = {};

// dtype= as a ScalarType: None, or one of the dtypes above; false for anything else.
bool parse_dtype(PyObject* obj, std::optional<at::ScalarType>& out) {
  if (obj == Py_None) return true;
  for (Py_ssize_t i = 0; i < kDtypeCount; ++i) {
    if (obj == dtype_objects[i]) {
      out = kDtypes[i];
      return true;
    }
  }
  return false;
}

// A Scalar argument: None, an exact int (in int64) or an exact float; false for anything else.
bool parse_scalar(PyObject* obj, std::optional<at::Scalar>& out) {
  if (obj == Py_None) return true;
  int64_t i = 0;
  if (exact_int(obj, i)) {
    out = at::Scalar(i);
    return true;
  }
  if (PyFloat_CheckExact(obj)) {
    out = at::Scalar(PyFloat_AsDouble(obj));
    return true;
  }
  return false;
}

using Dims = c10::SmallVector<int64_t, 8>;

// dim as the row's op takes it; false when it is not a plain None, int or list/tuple of ints.
bool parse_dims(PyObject* obj, DimKind kind, Dims& dims, bool& given) {
  given = obj != Py_None;
  if (!given) return kind != DimKind::kRequiredList && kind != DimKind::kRequiredInt;
  int64_t d = 0;
  if (exact_int(obj, d)) {
    dims.push_back(d);
    return true;
  }
  if (kind == DimKind::kInt || kind == DimKind::kRequiredInt) return false;
  const bool is_tuple = PyTuple_CheckExact(obj);
  if (!is_tuple && !PyList_CheckExact(obj)) return false;
  const Py_ssize_t n = is_tuple ? PyTuple_Size(obj) : PyList_Size(obj);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = is_tuple ? PyTuple_GetItem(obj, i) : PyList_GetItem(obj, i);  // borrowed
    if (item == nullptr || !exact_int(item, d)) {
      PyErr_Clear();
      return false;
    }
    dims.push_back(d);
  }
  return true;
}

// The tensor behind a torch.Tensor or Parameter (a new reference to its TensorImpl); undefined
// for anything else.
at::Tensor plain_tensor(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  if (tensor_type == nullptr || (type != reinterpret_cast<PyTypeObject*>(tensor_type) &&
                                 type != reinterpret_cast<PyTypeObject*>(parameter_type)))
    return {};
  PyObject* address = PyObject_GetAttr(obj, cdata_name);
  if (address == nullptr) {
    PyErr_Clear();
    return {};
  }
  void* impl = PyLong_AsVoidPtr(address);
  Py_DECREF(address);
  if (impl == nullptr) {
    PyErr_Clear();
    return {};
  }
  return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(
      static_cast<c10::TensorImpl*>(impl)));
}

// Collects the warnings of a call (the handler is per thread), to give them to Python once the
// call is back under the GIL.
class CollectWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override { warnings.push_back(warning); }
  std::vector<c10::Warning> warnings;
};

// As torch's bindings report them: the C++ location in the message unless verbatim. Returns
// false when a warning was turned into an error (the exception is then set).
bool report(const std::vector<c10::Warning>& warnings) {
  for (const c10::Warning& w : warnings) {
    PyObject* category = std::holds_alternative<c10::DeprecationWarning>(w.type()) ? PyExc_DeprecationWarning
                                                                                   : PyExc_UserWarning;
    const c10::SourceLocation& where = w.source_location();
    int result = 0;
    if (where.file == nullptr) {
      result = PyErr_WarnEx(category, w.msg().c_str(), 1);
    } else if (w.verbatim()) {
      result = PyErr_WarnExplicit(category, w.msg().c_str(), where.file, static_cast<int>(where.line), nullptr,
                                  nullptr);
    } else {
      const std::string msg = w.msg() + " (Triggered internally at " + where.file + ":" +
                              std::to_string(where.line) + ".)";
      result = PyErr_WarnEx(category, msg.c_str(), 1);
    }
    if (result < 0) return false;
  }
  return true;
}

class ReleaseGil {
 public:
  ReleaseGil() : state_(PyEval_SaveThread()) {}
  ~ReleaseGil() { PyEval_RestoreThread(state_); }
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* state_;
};

PyObject* not_taken() { Py_RETURN_NOTIMPLEMENTED; }

// reduce(op, x, dim, keepdim, dtype, scalar): the row `op`'s result(s), or NotImplemented (see
// the top). dtype and scalar: None, or what the row takes (Takes).
PyObject* reduce(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 6) {
    PyErr_SetString(PyExc_TypeError, "reduce(op, x, dim, keepdim, dtype, scalar) takes 6 arguments");
    return nullptr;
  }
  int64_t row = 0;
  if (!exact_int(args[0], row) || row < 0 || row >= kEagerOpCount) {
    PyErr_SetString(PyExc_ValueError, "reduce(): op is not one of the module's constants");
    return nullptr;
  }
  const EagerOp& op = kEagerOps[row];
  PyObject* keepdim = args[3];
  Dims dims;
  bool dim_given = false;
  std::optional<at::ScalarType> dtype;
  std::optional<at::Scalar> scalar;
  if ((keepdim != Py_True && keepdim != Py_False) || !parse_dims(args[2], op.dim, dims, dim_given) ||
      !parse_dtype(args[4], dtype) || (dtype && !(op.takes & kDtype)) || !parse_scalar(args[5], scalar) ||
      (scalar && !(op.takes & kScalar)))
    return not_taken();
  const at::Tensor x = plain_tensor(args[1]);
  if (!x.defined() || !(x.is_cpu() || x.is_cuda()) || at::impl::torch_function_mode_enabled() ||
      c10::impl::TorchDispatchModeTLS::any_modes_set())
    return not_taken();

  CollectWarnings collected;
  Results out;
  try {
    c10::WarningUtils::WarningHandlerGuard guard(&collected);
    ReleaseGil no_gil;
    out = op.call(Args{x, dim_given ? at::OptionalIntArrayRef(dims) : std::nullopt, keepdim == Py_True, dtype,
                       std::move(scalar)});
  } catch (...) {
    if (PyErr_Occurred()) PyErr_Clear();
    return not_taken();  // repeated through torch.ops, which reports it as torch does
  }
  if (!report(collected.warnings)) return nullptr;
  if (!out.second.defined()) return THPVariable_Wrap(std::move(out.first));
  PyObject* first = THPVariable_Wrap(std::move(out.first));
  PyObject* second = first == nullptr ? nullptr : THPVariable_Wrap(std::move(out.second));
  if (second == nullptr) {
    Py_XDECREF(first);
    return nullptr;
  }
  PyObject* pair = PyTuple_Pack(2, first, second);
  Py_DECREF(first);
  Py_DECREF(second);
  return pair;
}

// _init(torch.Tensor, torch.nn.Parameter, dtypes): the types whose instances reduce() takes, and
// the torch.dtype objects of kDtypes, in its order.
PyObject* init(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyType_Check(args[0]) || !PyType_Check(args[1]) || !PyTuple_Check(args[2]) ||
      PyTuple_Size(args[2]) != kDtypeCount) {
    PyErr_SetString(PyExc_TypeError, "_init(tensor_type, parameter_type, dtypes)");
    return nullptr;
  }
  PyObject* held[] = {tensor_type, parameter_type};
  tensor_type = args[0];
  parameter_type = args[1];
  Py_INCREF(tensor_type);
  Py_INCREF(parameter_type);
  for (PyObject* old : held) Py_XDECREF(old);
  for (Py_ssize_t i = 0; i < kDtypeCount; ++i) {
    PyObject* d = PyTuple_GetItem(args[2], i);
    Py_INCREF(d);
    Py_XDECREF(dtype_objects[i]);
    dtype_objects[i] = d;
  }
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"reduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(reduce)), METH_FASTCALL,
     "reduce(op, x, dim, keepdim, dtype, scalar): the op's result for a plain eager call, else NotImplemented"},
    {"_init", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(init)), METH_FASTCALL,
     "_init(torch.Tensor, torch.nn.Parameter, dtypes)"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "torch_reduce._C",
                       "The treduce ops library, and the eager entry of its Python wrappers.", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace
}  // namespace treduce

extern "C" PyMODINIT_FUNC PyInit__C() {
  using namespace treduce;
  if (cdata_name == nullptr && (cdata_name = PyUnicode_InternFromString("_cdata")) == nullptr) return nullptr;
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < kEagerOpCount; ++i) {
    if (PyModule_AddIntConstant(module, kEagerOps[i].name, static_cast<long>(i)) < 0) {
      Py_DECREF(module);
      return nullptr;
    }
  }
  return module;
}

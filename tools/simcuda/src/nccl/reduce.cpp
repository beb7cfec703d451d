// Element arithmetic per NCCL data type. Integers wrap (NCCL's kernels add them as unsigned
// machine integers); half, bfloat16 and the two fp8 formats are widened to float, combined, and
// rounded back to nearest-even after every step, which is what a kernel computing in the type does.
#include "reduce.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace simcuda::nccl {

namespace {

// ---- low-precision floats --------------------------------------------------------------------

float half_to_float(std::uint16_t h) {
  std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1f;
  std::uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// A float rounded to nearest-even into a format of `exponent_bits` / `mantissa_bits` with IEEE
// infinities (half, e5m2); values past the largest finite one become infinity (e5m2 saturates
// before it gets here).
std::uint32_t float_to_ieee_small(float f, int exponent_bits, int mantissa_bits) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  std::uint32_t sign = (bits >> 31) << (exponent_bits + mantissa_bits);
  std::uint32_t max_exponent = (1u << exponent_bits) - 1;
  if (std::isnan(f)) return sign | (max_exponent << mantissa_bits) | (1u << (mantissa_bits - 1));
  if (std::isinf(f)) return sign | (max_exponent << mantissa_bits);
  float a = std::fabs(f);
  int bias = (1 << (exponent_bits - 1)) - 1;
  // Scale so the smallest subnormal is 1, round to an integer (nearest-even), then re-encode.
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int unbiased = e - 1;
  int min_normal = 1 - bias;
  int shift = std::max(unbiased, min_normal) - mantissa_bits;
  float scaled = std::ldexp(a, -shift);
  float rounded = std::nearbyint(scaled);  // default rounding mode: to nearest, ties to even
  std::uint64_t q = static_cast<std::uint64_t>(rounded);
  // q is the significand (with the implicit bit) at exponent `shift`.
  std::uint64_t implicit = 1ull << mantissa_bits;
  int exponent_field;
  if (q >= (implicit << 1)) {  // rounding carried into a new binade
    q >>= 1;
    shift += 1;
  }
  if (q < implicit) {
    exponent_field = 0;  // subnormal (or zero)
  } else {
    exponent_field = shift + mantissa_bits + bias;
    q -= implicit;
  }
  if (exponent_field >= static_cast<int>(max_exponent)) return sign | (max_exponent << mantissa_bits);
  return sign | (static_cast<std::uint32_t>(exponent_field) << mantissa_bits) | static_cast<std::uint32_t>(q);
}

std::uint16_t float_to_half(float f) { return static_cast<std::uint16_t>(float_to_ieee_small(f, 5, 10)); }

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

std::uint16_t float_to_bf16(float f) {
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  std::uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float e5m2_to_float(std::uint8_t v) { return half_to_float(static_cast<std::uint16_t>(v << 8)); }
// Saturating, as CUDA's satfinite fp8 conversion: past the largest finite value (57344), infinities
// included, is the largest finite value; NaN stays NaN.
std::uint8_t float_to_e5m2(float f) {
  if (!std::isnan(f) && std::fabs(f) > 57344.0f) return std::signbit(f) ? 0xfb : 0x7b;
  return static_cast<std::uint8_t>(float_to_ieee_small(f, 5, 2));
}

// e4m3 ("fn"): no infinities, S.1111.111 is NaN, largest finite 448; out-of-range values saturate
// to 448, as CUDA's satfinite conversion does.
float e4m3_to_float(std::uint8_t v) {
  float sign = (v & 0x80) ? -1.0f : 1.0f;
  int exponent = (v >> 3) & 0xf;
  int mantissa = v & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

std::uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  std::uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::min(std::fabs(f), 448.0f);
  int e = 0;
  std::frexp(a, &e);
  int shift = std::max(e - 1, -6) - 3;
  float q = std::nearbyint(std::ldexp(a, -shift));
  if (q >= 16.0f) {
    q /= 2;
    shift += 1;
  }
  if (a == 0.0f) return sign;
  int exponent_field = q < 8.0f ? 0 : shift + 3 + 7;
  int mantissa = static_cast<int>(q) - (q < 8.0f ? 0 : 8);
  return static_cast<std::uint8_t>(sign | (exponent_field << 3) | mantissa);
}

// ---- per-type element access -----------------------------------------------------------------

template <typename Storage, float (*To)(Storage), Storage (*From)(float)>
struct narrow_float {
  using storage = Storage;
  using value = float;
  static value load(const void* p, std::size_t i) {
    Storage s;
    std::memcpy(&s, static_cast<const char*>(p) + i * sizeof(Storage), sizeof s);
    return To(s);
  }
  static void store(void* p, std::size_t i, value v) {
    Storage s = From(v);
    std::memcpy(static_cast<char*>(p) + i * sizeof(Storage), &s, sizeof s);
  }
  static value round(value v) { return To(From(v)); }
};

template <typename T>
struct plain {
  using value = T;
  static value load(const void* p, std::size_t i) { return static_cast<const T*>(p)[i]; }
  static void store(void* p, std::size_t i, value v) { static_cast<T*>(p)[i] = v; }
  static value round(value v) { return v; }
};

template <typename T, reduction::kind Op>
T combine(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (Op == reduction::kind::prod) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    if constexpr (Op == reduction::kind::max) return std::max(a, b);
    if constexpr (Op == reduction::kind::min) return std::min(a, b);
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    if constexpr (Op == reduction::kind::prod) return a * b;
    // NCCL's max/min propagate NaN.
    if constexpr (Op == reduction::kind::max) return (std::isnan(a) || std::isnan(b)) ? a + b : std::max(a, b);
    if constexpr (Op == reduction::kind::min) return (std::isnan(a) || std::isnan(b)) ? a + b : std::min(a, b);
    return a + b;
  }
}

// Rank by rank over the whole run (the inner loop has no branches, so it vectorizes), the
// accumulator rounded to the element type after every step.
template <typename Access, reduction::kind Op>
void reduce_with(void* out, const void* const* inputs, int n, std::size_t count, const reduction& how) {
  using V = typename Access::value;
  constexpr bool premul = Op == reduction::kind::premul_sum;
  const V scalar = static_cast<V>(how.scalar);
  auto input = [&](int k, std::size_t i) {
    V v = Access::load(inputs[k], i);
    if constexpr (premul) v = Access::round(static_cast<V>(v * scalar));
    return v;
  };
  std::vector<V> acc(count);
  for (std::size_t i = 0; i < count; ++i) acc[i] = input(0, i);
  for (int k = 1; k < n; ++k)
    for (std::size_t i = 0; i < count; ++i) acc[i] = Access::round(combine<V, Op>(acc[i], input(k, i)));
  if constexpr (Op == reduction::kind::avg_int && std::is_integral_v<V>)
    for (V& v : acc) v = static_cast<V>(v / static_cast<V>(how.ranks));
  for (std::size_t i = 0; i < count; ++i) Access::store(out, i, acc[i]);
}

template <typename Access>
void reduce_as(void* out, const void* const* inputs, int n, std::size_t count, const reduction& how) {
  using kind = reduction::kind;
  switch (how.op) {
    case kind::sum:
      return reduce_with<Access, kind::sum>(out, inputs, n, count, how);
    case kind::prod:
      return reduce_with<Access, kind::prod>(out, inputs, n, count, how);
    case kind::max:
      return reduce_with<Access, kind::max>(out, inputs, n, count, how);
    case kind::min:
      return reduce_with<Access, kind::min>(out, inputs, n, count, how);
    case kind::avg_int:
      return reduce_with<Access, kind::avg_int>(out, inputs, n, count, how);
    case kind::premul_sum:
      return reduce_with<Access, kind::premul_sum>(out, inputs, n, count, how);
  }
}

}  // namespace

std::size_t element_bytes(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* type_name(ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt8:
      return "ncclInt8";
    case ncclUint8:
      return "ncclUint8";
    case ncclInt32:
      return "ncclInt32";
    case ncclUint32:
      return "ncclUint32";
    case ncclInt64:
      return "ncclInt64";
    case ncclUint64:
      return "ncclUint64";
    case ncclFloat16:
      return "ncclFloat16";
    case ncclFloat32:
      return "ncclFloat32";
    case ncclFloat64:
      return "ncclFloat64";
    case ncclBfloat16:
      return "ncclBfloat16";
    case ncclFloat8e4m3:
      return "ncclFloat8e4m3";
    case ncclFloat8e5m2:
      return "ncclFloat8e5m2";
    default:
      return "an unknown data type";
  }
}

void reduce(void* out, const void* const* inputs, int n, std::size_t count, ncclDataType_t type,
            const reduction& how) noexcept {
  switch (type) {
    case ncclInt8:
      return reduce_as<plain<std::int8_t>>(out, inputs, n, count, how);
    case ncclUint8:
      return reduce_as<plain<std::uint8_t>>(out, inputs, n, count, how);
    case ncclInt32:
      return reduce_as<plain<std::int32_t>>(out, inputs, n, count, how);
    case ncclUint32:
      return reduce_as<plain<std::uint32_t>>(out, inputs, n, count, how);
    case ncclInt64:
      return reduce_as<plain<std::int64_t>>(out, inputs, n, count, how);
    case ncclUint64:
      return reduce_as<plain<std::uint64_t>>(out, inputs, n, count, how);
    case ncclFloat32:
      return reduce_as<plain<float>>(out, inputs, n, count, how);
    case ncclFloat64:
      return reduce_as<plain<double>>(out, inputs, n, count, how);
    case ncclFloat16:
      return reduce_as<narrow_float<std::uint16_t, half_to_float, float_to_half>>(out, inputs, n, count, how);
    case ncclBfloat16:
      return reduce_as<narrow_float<std::uint16_t, bf16_to_float, float_to_bf16>>(out, inputs, n, count, how);
    case ncclFloat8e4m3:
      return reduce_as<narrow_float<std::uint8_t, e4m3_to_float, float_to_e4m3>>(out, inputs, n, count, how);
    case ncclFloat8e5m2:
      return reduce_as<narrow_float<std::uint8_t, e5m2_to_float, float_to_e5m2>>(out, inputs, n, count, how);
    default:
      return;
  }
}

double load_scalar(const void* pointer, ncclDataType_t type) noexcept {
  switch (type) {
    case ncclInt8:
      return plain<std::int8_t>::load(pointer, 0);
    case ncclUint8:
      return plain<std::uint8_t>::load(pointer, 0);
    case ncclInt32:
      return plain<std::int32_t>::load(pointer, 0);
    case ncclUint32:
      return plain<std::uint32_t>::load(pointer, 0);
    case ncclInt64:
      return static_cast<double>(plain<std::int64_t>::load(pointer, 0));
    case ncclUint64:
      return static_cast<double>(plain<std::uint64_t>::load(pointer, 0));
    case ncclFloat32:
      return plain<float>::load(pointer, 0);
    case ncclFloat64:
      return plain<double>::load(pointer, 0);
    case ncclFloat16:
      return narrow_float<std::uint16_t, half_to_float, float_to_half>::load(pointer, 0);
    case ncclBfloat16:
      return narrow_float<std::uint16_t, bf16_to_float, float_to_bf16>::load(pointer, 0);
    case ncclFloat8e4m3:
      return narrow_float<std::uint8_t, e4m3_to_float, float_to_e4m3>::load(pointer, 0);
    case ncclFloat8e5m2:
      return narrow_float<std::uint8_t, e5m2_to_float, float_to_e5m2>::load(pointer, 0);
    default:
      return 0;
  }
}

}  // namespace simcuda::nccl

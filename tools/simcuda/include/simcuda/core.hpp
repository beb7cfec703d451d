// simcuda core: the one simulated machine that every stand-in library (libcudart.so.13,
// libcuda.so.1, libcublas.so.13, ...) shares. It lives in libsimcuda.so; the stand-ins are thin
// translations of their API onto these calls.
//
// Glossary
//   device        a simulated GPU: an ordinal, its properties (gpu_spec) and its memory.
//   arena         the device's reserved virtual range (PROT_NONE, MAP_NORESERVE): every device
//                 address of that GPU lies inside it, so a pointer names its device.
//   physical      bytes of the device's "HBM": offsets in one memfd per device, counted against
//                 the capacity. A page costs host RAM only once something writes it.
//   allocation    a cudaMalloc range: physical bytes mapped read/write at an arena address.
//   reservation   a cuMemAddressReserve range: arena addresses, no physical bytes until mapped.
//   handle        a cuMemCreate physical allocation (a memfd offset run), mapped anywhere.
//   mapped bytes  physical bytes currently held (allocations + handles); cudaMemGetInfo's free
//                 is capacity - mapped bytes.
//   stream/event  ordering objects. Work is executed at the call, so streams are trivially in
//                 order; what is simulated is *when an event reports completion* (event_mode).
//   tick          one API call that queues work; in deferred event mode an event completes
//                 after `deferred_ticks` later ticks, or at any synchronize.
//   capture       a stream capture sequence: work queued on its streams is recorded as graph
//                 nodes instead of executed (Note [simulated capture] in src/core/capture.cpp).
//   graph / exec  what a capture recorded / its instantiated copy, which a launch executes.
//
// Threading: every function here is thread-safe (one mutex per concern). Nothing here throws
// across the C boundary: failures are status values, broken invariants abort with a message.
//
// The API lives in one header per concern, each including what it builds on: config.hpp,
// diagnostics.hpp, devices.hpp, memory.hpp, streams.hpp, graphs.hpp, objects.hpp. This header
// gathers them.
#pragma once

#include "simcuda/config.hpp"
#include "simcuda/devices.hpp"
#include "simcuda/diagnostics.hpp"
#include "simcuda/graphs.hpp"
#include "simcuda/memory.hpp"
#include "simcuda/objects.hpp"
#include "simcuda/streams.hpp"

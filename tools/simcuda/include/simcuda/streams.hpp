// Streams and events of the simulated GPUs.
// Part of simcuda's core API (core.hpp gathers it, with the glossary).
#pragma once

#include "simcuda/memory.hpp"

namespace simcuda {

// ---------------------------------------------------------------------------------------------
// Streams and events. Handles are the addresses of these objects; 0 (legacy default) and the
// special values 0x1 (cudaStreamLegacy) and 0x2 (cudaStreamPerThread) are the device's default
// stream.
// ---------------------------------------------------------------------------------------------

struct stream;
struct event;

/// The stream a CUDA handle names for the current device; nullptr if the handle is not a live
/// stream (destroyed or never created).
stream* resolve_stream(const void* handle) noexcept;
stream* create_stream(int device, unsigned flags, int priority) noexcept;
bool destroy_stream(stream* s) noexcept;
int stream_device(const stream* s) noexcept;
unsigned stream_flags(const stream* s) noexcept;
int stream_priority(const stream* s) noexcept;
std::uint64_t stream_id(const stream* s) noexcept;

/// One unit of queued work: ticks the deferred-event clock.
void tick() noexcept;

event* create_event(int device, unsigned flags) noexcept;
bool valid_event(const event* e) noexcept;
bool destroy_event(event* e) noexcept;
int event_device(const event* e) noexcept;
unsigned event_flags(const event* e) noexcept;
/// Records `e` on `s`; when it completes depends on event_mode.
void record_event(event* e, stream* s) noexcept;
/// True when complete (an event never recorded is complete, as in CUDA).
bool query_event(event* e) noexcept;
/// Completes `e` (and everything recorded before it).
void synchronize_event(event* e) noexcept;
/// Completes every event recorded on `s`.
void synchronize_stream(stream* s) noexcept;
bool query_stream(stream* s) noexcept;
/// Completes every event of `device` (or of all devices when device < 0).
void synchronize_device(int device) noexcept;
/// Milliseconds between two completed events (host clock at record time).
bool elapsed_ms(event* start, event* end, float* ms) noexcept;

}  // namespace simcuda

// The error every rank raises when a collective fails (a peer exited, the
// process-group timeout passed, the transport broke): one wording, one list of
// the usual causes, wherever the failure is noticed (the pre-collective check,
// the host backend, the shared-memory data path).
#pragma once

#include <exception>
#include <string>

namespace neuron::distributed {

// What an exception says, without a C++ backtrace.
std::string message_of(const std::exception& e);
std::string message_of(std::exception_ptr error);

// Throws c10::DistBackendError: "neuron backend: <call> failed<while>: <cause>" and the usual causes.
// `call` names the collective, the rank and its tensors ("all_reduce on rank 1 of 4 (Float[1024] on
// neuron:1)"); `while_` says at which stage, if it helps ("while the ranks met to start it").
[[noreturn]] void raise_collective_failure(const std::string& call, const std::string& cause,
                                           const char* while_ = "");

} // namespace neuron::distributed

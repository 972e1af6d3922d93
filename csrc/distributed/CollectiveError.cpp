#include "distributed/CollectiveError.h"

#include <c10/util/Exception.h>

namespace neuron::distributed {

std::string message_of(const std::exception& e) {
  const auto* err = dynamic_cast<const c10::Error*>(&e);
  return err ? err->what_without_backtrace() : e.what();
}

std::string message_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return message_of(e);
  } catch (...) {
    return "unknown error";
  }
}

void raise_collective_failure(const std::string& call, const std::string& cause, const char* while_) {
  C10_THROW_ERROR(
      DistBackendError,
      c10::str("neuron backend: ", call, " failed", while_, ": ", cause,
               "\nUsual causes: a peer rank exited, or did not reach this collective within the process group "
               "timeout; or the ranks passed tensors of different shapes or dtypes."));
}

} // namespace neuron::distributed

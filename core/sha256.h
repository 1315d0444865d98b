// SHA-256 (FIPS 180-4) of a byte string, as 64 lowercase hex digits: the
// hash a calibration file records for each input it was fitted from, so
// that `sha256sum FILE` on the cluster says whether a file is the one used.
#pragma once

#include <string>
#include <string_view>

namespace foldplan {

std::string Sha256Hex(std::string_view bytes);

}  // namespace foldplan

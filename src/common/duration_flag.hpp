#pragma once
// A CLI11 check for duration flags ("5s", "500ms", "2m"), shared by the
// daemons' command lines so every flag takes durations the same way.
// Header-only, for the code that links CLI11 (the daemons' flags).
//
//   app.add_option("--health-interval", text)->check(hami::duration_flag());
//   app.add_option("--xid-recovery", text)->check(hami::duration_flag(/*allow_zero=*/true));

#include <CLI/CLI.hpp>
#include <string>

#include "common/size_parse.hpp"

namespace hami {

inline CLI::Validator duration_flag(bool allow_zero = false) {
  return CLI::Validator(
      [allow_zero](std::string& s) -> std::string {
        auto d = parse_duration(s);
        if (!d) return d.error().message;
        if (allow_zero ? d->count() < 0 : d->count() <= 0) {
          return allow_zero ? "must not be negative" : "must be more than zero";
        }
        return {};
      },
      "DURATION");
}

}  // namespace hami

// Every INGOT_* environment switch, in one table (flags.cpp): its name, kind, default and help. The
// library reads a switch only through these functions, never with getenv, so that the set of
// switches, their spelling and their parsing are in one place; `ingot --help-flags` prints the table.
//
// A switch is read once, at its first use, unless the table marks it live (read at every use, for
// tests that set it in-process). A value that does not parse (INGOT_FLASH_ATTENTION=maybe) is
// reported once on stderr, naming the switch, and the default is used: switches are read from static
// initializers and kernels, where throwing would abort the process.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ingot::flags {

enum class Kind : uint8_t {
  Bool,  // 0/1 (also false/true, off/on, no/yes)
  Int,   // a decimal integer
  List,  // comma-separated names
  Text,  // a string as given (a path, a URL)
};

struct Flag {
  std::string_view name;           // INGOT_...
  Kind kind;
  std::string_view default_value;  // as it would be written in the environment
  std::string_view help;
  bool live = false;               // re-read at every use (tests set it while the process runs)
};

// The table, in the order `ingot --help-flags` prints it.
std::span<const Flag> all();

// The switch's value (or its default). Asking for a name the table does not hold, or with the wrong
// kind, is a programming error and throws.
bool enabled(std::string_view name);
int64_t integer(std::string_view name);
std::vector<std::string> list(std::string_view name);
bool list_contains(std::string_view name, std::string_view item);
std::string text(std::string_view name);  // "" when unset

// The table as text: name, kind, default, current value when set, help.
std::string describe();

}  // namespace ingot::flags

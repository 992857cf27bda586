// Helpers shared by the mmdoc tool's commands: exit statuses and the one-line
// error messages, JSON arguments, writing documents, BSON to JSON, and the
// progress bar.
//
// Exit statuses (the contract in DESIGN.md):
//   0  success
//   1  not found, or a failed check
//   2  bad input or usage (and every other failure)
// Every failure prints exactly one line "mmdoc: <what>: <detail>" on stderr.
#ifndef MMDOC_TOOLS_TOOL_UTIL_H_
#define MMDOC_TOOLS_TOOL_UTIL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "mmdoc/document.h"
#include "mmdoc/status.h"

namespace mmdoc::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitNotFound = 1;  // also: a failed check
inline constexpr int kExitBadInput = 2;  // also: usage and every other error

// Gives /dev/null, read-only, each of descriptors 0, 1 and 2 that is
// closed, so that no file the tool opens (a database, an output, a
// temporary file) becomes its standard input or output; writing to a
// closed one still fails. Called first in main.
void ClaimStdio();
// Whether standard input was closed when the tool started: reading it is
// then an error, not an empty input.
bool StdinClosed();
// Notes that the command committed a change; an output it then fails to
// write says so, so that nobody makes the change again.
void NoteCommitted();
bool Committed();

// `text` with control bytes (a terminal's escapes, NUL) written as \xNN:
// names and bytes from a damaged file are printed through it.
std::string Printable(std::string_view text);

// Prints "mmdoc: <what>: <detail>" as one line on stderr (newlines in
// detail become spaces) and returns `code`.
int Fail(int code, std::string_view what, std::string_view detail);
// As Fail, for a problem that did not undo what the command did: one line
// "mmdoc: warning: <what>: <detail>" on stderr; the exit status stays.
void Warn(std::string_view what, std::string_view detail);

// The exit status for a failed Status: NotFound -> 1, everything else -> 2.
int ExitCodeFor(const Status& s);

// A readable detail for a failed Status, e.g. Busy becomes "database is
// locked by another process or handle: <file>".
std::string Describe(const Status& s);

// Fail(ExitCodeFor(s), what, Describe(s)).
int FailStatus(std::string_view what, const Status& s);

// libbson's parse errors may already say "invalid JSON"; say it once.
std::string JsonError(const Status& s);

// Parses a JSON document given on the command line (a filter, an update).
std::optional<Document> ParseDocArg(std::string_view what, const std::string& json, int* code);

// s in double quotes.
std::string Quote(std::string_view s);

// How a command writes documents: BSON, or Extended JSON in one of its
// modes (--format, --json-mode).
struct DocFormat {
  bool bson = false;
  JsonMode json_mode = JsonMode::kRelaxed;
};

// Parses --json-mode's "relaxed" or "canonical" (CLI11 has checked it).
JsonMode ParseJsonMode(const std::string& name);

// Writes one document as `format` says, a JSON document on a line of its
// own. False on a write error or a document that cannot be written as
// JSON (*error says which).
bool WriteDoc(FILE* out, const DocFormat& format, std::string_view raw, std::string* json,
              std::string* error);

// Why `path` is not a dotted field path ("a", "a.b.c"), or "" when it is
// one: it is empty, has an empty part ("a..b", ".a", "a."), or has a part
// starting with '$' (operators, never field names).
std::string FieldPathProblem(std::string_view path);

// A whole decimal number in int64's range ("-12", "0", "42"; no sign '+',
// no spaces, no other base), into *out. False for anything else, including
// values out of range (rather than saturating or wrapping around).
bool ParseInt64(std::string_view text, int64_t* out);

// Extended JSON of one BSON document, on one line (mmdoc::BsonToJson).
// False when the bytes are not a valid document or hold invalid UTF-8.
bool BsonToJson(const uint8_t* data, size_t size, std::string* out,
                JsonMode mode = JsonMode::kRelaxed);

// A progress bar on stderr, drawn only when `enabled` (the caller passes
// isatty(stderr)) and only once the job has run for half a second, so
// short jobs never show one. Redrawn at most ten times a second; Finish()
// erases it.
class Progress {
 public:
  // `total` is the expected amount of work in the unit of Update's `done`
  // (bytes or documents); 0 when unknown (no percentage then).
  Progress(std::string label, uint64_t total, bool enabled);
  ~Progress() { Finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` units of `total`, `docs` documents so far.
  void Update(uint64_t done, uint64_t docs) {
    if (enabled_ && (++calls_ & 255) == 0) Draw(done, docs);
  }
  void Finish();

 private:
  void Draw(uint64_t done, uint64_t docs);

  std::string label_;
  uint64_t total_;
  bool enabled_;
  bool drawn_ = false;
  uint64_t calls_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace mmdoc::tool

#endif  // MMDOC_TOOLS_TOOL_UTIL_H_

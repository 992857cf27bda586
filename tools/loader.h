// Inserting a stream of documents in batched transactions, as insert and
// import do, and reporting a failure in the stream so that exactly the input
// before it stays committed; splitting JSON text into its documents.
#ifndef MMDOC_TOOLS_LOADER_H_
#define MMDOC_TOOLS_LOADER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "mmdoc/status.h"

namespace mmdoc::tool {

// Inserts documents in transactions of up to `batch` documents, as insert
// and import do. With echo, prints each _id on stdout once the commit that
// holds it has returned (so an echoed _id is durable per the mode).
class Loader {
 public:
  Loader(DB* db, std::string collection, uint64_t batch, bool echo);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Inserts one document into the open batch (beginning one if needed),
  // committing the batch when full. A duplicate _id or unique-index
  // violation comes back as AlreadyExists with a message that says which.
  Status Add(const Document& doc);

  // Commits the open batch, if any, and echoes its ids.
  Status Flush();

  uint64_t inserted() const { return inserted_; }
  // After a commit failed: " (the commit of the N documents up to here
  // failed[: why]; the M before them are committed)", for the error
  // message; "" otherwise.
  std::string FailedCommitNote(const std::string& why = "") const;

 private:
  // Tells a duplicate _id from a unique-index violation, naming the value.
  Status Explain(const Status& s, const Document& doc);

  DB* db_;
  std::string collection_;
  uint64_t batch_;
  bool echo_;
  std::unique_ptr<Transaction> txn_;
  std::vector<Value> ids_;
  uint64_t bytes_ = 0;
  uint64_t inserted_ = 0;
  uint64_t failed_commit_ = 0;  // documents in the batch whose commit failed
};

// Reports a failed insert at `where` ("line 7"), after committing what came
// before it in the same batch, so that exactly the input before `where` is
// in the database.
int FailInsert(Loader* loader, const std::string& where, const std::string& detail);
// Reports the last batch's failed commit `s` (from Flush) at `what`, with
// how many documents it held and how many are committed.
int FailCommit(const Loader& loader, const std::string& what, const Status& s);

// Whether a line of input holds only whitespace (skipped, not an error).
bool IsBlank(std::string_view line);

// Splits JSON text into the text of its documents, as mongoimport reads a
// file: documents one after another (one per line as mongoexport writes
// them, pretty-printed over many lines, or several on a line), or one JSON
// array of documents (mongoimport --jsonArray, mongoexport --jsonArray),
// taken as such when the first thing in the text is '['. A UTF-8 byte
// order mark at the start is skipped.
//
// It only finds where each document ends: the '}' that closes its first
// '{', outside strings. Whether the text is valid JSON is for
// Document::FromJson to say. Reads `in` in blocks; holds one document's
// text at a time (at most kMaxJsonDocumentText bytes).
class JsonDocumentStream {
 public:
  // Longer document text is an error: canonical Extended JSON of a 16 MiB
  // document (the BSON limit) is at most about 6 times as long.
  static constexpr size_t kMaxJsonDocumentText = 8 * kMaxDocumentSize;

  enum class Next { kDocument, kEnd, kError };

  // With require_array, the text must be one array (--json-array).
  JsonDocumentStream(FILE* in, bool require_array);
  JsonDocumentStream(const JsonDocumentStream&) = delete;
  JsonDocumentStream& operator=(const JsonDocumentStream&) = delete;

  // The next document's text into *text. kEnd at the end of the input;
  // kError when the text around the documents is wrong (error() says how)
  // or reading failed (error() is strerror's).
  Next Read(std::string* text);

  // Where the document last returned (or the error) is: its number from 1
  // and the line it starts on, from 1.
  uint64_t document() const { return document_; }
  uint64_t line() const { return start_line_; }
  // Bytes consumed so far (for a progress bar).
  uint64_t bytes() const { return bytes_; }
  const std::string& error() const { return error_; }

 private:
  // The next byte, or -1 at the end of input (or on a read error).
  int Peek();
  void Skip() {
    if (buf_[pos_] == '\n') ++line_;
    ++pos_;
    ++bytes_;
  }
  void SkipSpace();
  Next Fail(std::string message);
  // Reads one document from its '{' into *text.
  Next ReadDocument(std::string* text);

  FILE* in_;
  bool require_array_;
  std::string buf_;
  size_t pos_ = 0;
  size_t end_ = 0;
  bool started_ = false;   // the byte order mark and '[' are behind us
  bool in_array_ = false;  // inside the top-level array
  bool done_ = false;      // the array was closed
  bool read_error_ = false;
  uint64_t line_ = 1;
  uint64_t start_line_ = 1;
  uint64_t document_ = 0;
  uint64_t bytes_ = 0;
  std::string error_;
};

}  // namespace mmdoc::tool

#endif  // MMDOC_TOOLS_LOADER_H_

// Inserting a stream of documents in batched transactions, as insert and
// import do, and reporting a failure in the stream so that exactly the input
// before it stays committed.
#ifndef MMDOC_TOOLS_LOADER_H_
#define MMDOC_TOOLS_LOADER_H_

#include <cstdint>
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
};

// Reports a failed insert at `where` ("line 7"), after committing what came
// before it in the same batch, so that exactly the input before `where` is
// in the database.
int FailInsert(Loader* loader, const std::string& where, const std::string& detail);

// Whether a line of input holds only whitespace (skipped, not an error).
bool IsBlank(std::string_view line);

}  // namespace mmdoc::tool

#endif  // MMDOC_TOOLS_LOADER_H_

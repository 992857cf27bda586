// TestDB: a database in a fresh temporary directory for engine tests. Its
// destructor runs DB::Check() and fails the test when the database is not
// consistent, so every test that uses it ends with a full check.
#ifndef MMDOC_TESTS_SUPPORT_TEST_DB_H_
#define MMDOC_TESTS_SUPPORT_TEST_DB_H_

#include <memory>
#include <string>

#include "mmdoc/db.h"
#include "tests/support/test_env.h"

namespace mmdoc::test {

// Parses JSON or fails the test.
Document J(const std::string& json);
// Parses a JSON value or fails the test.
Value V(const std::string& json);

// Runs DB::Check on db and fails the test, naming every problem, unless it
// passes.
void RequireCheckPasses(DB* db);

class TestDB {
 public:
  explicit TestDB(Options options = Options());
  ~TestDB();  // checks, then closes

  DB* operator->() { return db_.get(); }
  DB* get() { return db_.get(); }
  const std::string& path() const { return path_; }
  const TempDir& dir() const { return dir_; }
  Options& options() { return options_; }

  // Closes (checkpointing) and opens again; fails the test on error.
  void Reopen();
  void Close() { db_.reset(); }
  // Opens again after Close; returns the status.
  Status TryOpen();
  // Runs DB::Check and fails the test (with every problem) when it fails.
  void CheckNow();

 private:
  TempDir dir_;
  std::string path_;
  Options options_;
  std::unique_ptr<DB> db_;
};

}  // namespace mmdoc::test

#endif  // MMDOC_TESTS_SUPPORT_TEST_DB_H_

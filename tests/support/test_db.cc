#include "tests/support/test_db.h"

#include <catch2/catch.hpp>
#include <exception>

namespace mmdoc::test {

Document J(const std::string& json) {
  auto d = Document::FromJson(json);
  INFO(json << ": " << d.status().ToString());
  REQUIRE(d.ok());
  return d.value();
}

Value V(const std::string& json) {
  auto v = Value::FromJson(json);
  INFO(json << ": " << v.status().ToString());
  REQUIRE(v.ok());
  return v.value();
}

TestDB::TestDB(Options options) : path_(dir_.File("test.mmdb")), options_(options) {
  Status s = TryOpen();
  INFO(s.ToString());
  REQUIRE(s.ok());
}

Status TestDB::TryOpen() {
  auto db = DB::Open(path_, options_);
  if (!db.ok()) return db.status();
  db_ = std::move(db.value());
  return Status::OK();
}

void TestDB::Reopen() {
  db_.reset();
  Status s = TryOpen();
  INFO(s.ToString());
  REQUIRE(s.ok());
}

namespace {
// DB::Check's status and problems, one per line; *ok when it passed.
std::string DescribeCheck(DB* db, bool* ok) {
  CheckReport report;
  Status s = db->Check(&report);
  std::string all = "DB::Check: " + s.ToString();
  for (const std::string& p : report.problems) all += "\n  " + p;
  *ok = s.ok();
  return all;
}
}  // namespace

void RequireCheckPasses(DB* db) {
  bool ok;
  std::string why = DescribeCheck(db, &ok);
  INFO(why);
  REQUIRE(ok);
}

void TestDB::CheckNow() {
  if (!db_) return;
  bool ok;
  std::string why = DescribeCheck(db_.get(), &ok);
  INFO(why);
  CHECK(ok);
}

TestDB::~TestDB() {
  if (std::uncaught_exceptions() == 0) CheckNow();
  db_.reset();
}

}  // namespace mmdoc::test

// The typed mapping layer: structs in, structs out, errors named.
#include "mmdoc/mapping.h"

#include <catch2/catch.hpp>

#include "tests/support/test_db.h"

using namespace mmdoc;
using mmdoc::test::J;
using mmdoc::test::TestDB;

namespace {

struct Person {
  std::string id;
  std::string name;
  int32_t age = 0;
  int64_t visits = 0;
  double score = 0;
  bool admin = false;
  std::vector<std::string> tags;
  std::vector<int64_t> lucky;
};

const Mapping<Person>& PersonMapping() {
  static const Mapping<Person> m = Mapping<Person>()
                                       .Id(&Person::id)
                                       .Field("name", &Person::name)
                                       .Field("age", &Person::age)
                                       .Field("visits", &Person::visits)
                                       .Field("score", &Person::score)
                                       .Field("admin", &Person::admin)
                                       .Field("tags", &Person::tags)
                                       .Field("lucky", &Person::lucky);
  return m;
}

Person MakePerson(std::string id, std::string name, int32_t age = 0) {
  Person p;
  p.id = std::move(id);
  p.name = std::move(name);
  p.age = age;
  return p;
}

}  // namespace

TEST_CASE("typed collections round-trip structs", "[engine][mapping]") {
  TestDB db;
  TypedCollection<Person> people(db.get(), "people", PersonMapping());
  Person ada{"p1", "ada", 36, 1LL << 40, 2.5, true, {"math", "poetry"}, {7, 13}};
  REQUIRE(people.Insert(ada).ok());
  REQUIRE(people.Insert(MakePerson("p2", "bob", 17)).ok());
  CHECK(people.Insert(MakePerson("p1", "dup")).IsAlreadyExists());

  auto got = people.Get(Value::String("p1"));
  REQUIRE(got.ok());
  CHECK(got.value().name == "ada");
  CHECK(got.value().age == 36);
  CHECK(got.value().visits == (1LL << 40));
  CHECK(got.value().score == 2.5);
  CHECK(got.value().admin);
  CHECK(got.value().tags == std::vector<std::string>{"math", "poetry"});
  CHECK(got.value().lucky == std::vector<int64_t>{7, 13});

  // The stored document is plain BSON that the raw API reads.
  auto raw = db->Get("people", Value::String("p1"));
  REQUIRE(raw.ok());
  CHECK(raw.value().Get("age").value().ToJson() == "36");

  auto adults = people.Find(J(R"({"age": {"$gte": 18}})"));
  REQUIRE(adults.ok());
  REQUIRE(adults.value().size() == 1);
  CHECK(adults.value()[0].id == "p1");

  ada.age = 37;
  REQUIRE(people.Replace(ada).ok());
  CHECK(people.Get(Value::String("p1")).value().age == 37);
  REQUIRE(people.Delete(Value::String("p2")).ok());
  CHECK(people.Get(Value::String("p2")).status().IsNotFound());
}

TEST_CASE("typed decoding names the field with the wrong type", "[engine][mapping]") {
  TestDB db;
  REQUIRE(db->Insert("people", J(R"({"_id": "x", "age": "old", "score": 3})")).ok());
  REQUIRE(db->Insert("people", J(R"({"_id": "y", "age": 1.0e12})")).ok());
  REQUIRE(db->Insert("people", J(R"({"_id": "z", "age": 41.0, "visits": 2.0})")).ok());
  TypedCollection<Person> people(db.get(), "people", PersonMapping());
  auto x = people.Get(Value::String("x"));
  CHECK(x.status().IsInvalidArgument());
  CHECK(x.status().ToString().find("age") != std::string::npos);
  CHECK(people.Get(Value::String("y")).status().IsInvalidArgument());  // does not fit int32
  auto z = people.Get(Value::String("z"));
  REQUIRE(z.ok());
  CHECK(z.value().age == 41);
  CHECK(z.value().visits == 2);
  CHECK(people.Insert(MakePerson("bad", std::string("\xff\xfe"))).IsInvalidArgument());
}

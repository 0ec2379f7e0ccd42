#include "frugal/status.h"

#include <gtest/gtest.h>

#include "frugal/check.h"

namespace frugal {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  FRUGAL_ASSIGN_OR_RETURN(int h, Half(x));
  FRUGAL_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = TimeoutError("no message from rank 3 within 100 ms");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.ToString(), "Timeout: no message from rank 3 within 100 ms");
  EXPECT_EQ(s.Annotate("allreduce").message(), "allreduce: no message from rank 3 within 100 ms");
  EXPECT_TRUE(Status::Ok().Annotate("x").ok());
}

TEST(StatusTest, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, ValueOfErrorThrows) {
  StatusOr<int> v = NotFoundError("nothing");
  EXPECT_THROW(v.value(), CheckError);
  // Braces: with parentheses the statement would declare a variable named Status::Ok.
  EXPECT_THROW(StatusOr<int>{Status::Ok()}, InternalAssertError);
}

TEST(CheckTest, MessageNamesValues) {
  try {
    FRUGAL_CHECK_EQ(3, 4, "lengths");
    FAIL();
  } catch (const CheckError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("3 == 4"), std::string::npos) << what;
    EXPECT_NE(what.find("(3 vs. 4)"), std::string::npos) << what;
    EXPECT_NE(what.find("status_test.cc"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(FRUGAL_CHECK(1 + 1 == 2));
  EXPECT_THROW(FRUGAL_INTERNAL_ASSERT(false, "bug"), InternalAssertError);
}

}  // namespace
}  // namespace frugal

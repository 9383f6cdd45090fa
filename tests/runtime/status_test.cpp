// Status: code names, the one-line rendering, and KILN_RETURN_IF_ERROR's propagation.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/status.h"

namespace {

using kiln::Status;
using kiln::StatusCode;

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.toString(), "ok");
}

TEST(StatusTest, ToStringIsCodeNameThenMessage) {
  Status s(StatusCode::kNoKernelImage,
           "rmsnorm_h4096_bf16: artifact has sm_80 only; device is sm_90");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.toString(),
            "no kernel image: rmsnorm_h4096_bf16: artifact has sm_80 only; device is sm_90");
}

TEST(StatusTest, EveryCodeHasItsOwnName) {
  const StatusCode codes[] = {StatusCode::kOk,
                              StatusCode::kInvalidArgument,
                              StatusCode::kNotSupported,
                              StatusCode::kNoKernelImage,
                              StatusCode::kDriverError,
                              StatusCode::kDriverUnavailable,
                              StatusCode::kCaptureRefused,
                              StatusCode::kPoisoned,
                              StatusCode::kInternal,
                              StatusCode::kDriverTooOld};
  std::set<std::string> names;
  for (StatusCode code : codes) names.insert(kiln::statusCodeName(code));
  EXPECT_EQ(names.size(), std::size(codes));
  EXPECT_EQ(names.count("unknown status code"), 0u);
  EXPECT_STREQ(kiln::statusCodeName(StatusCode::kCaptureRefused), "capture refused");
}

Status failsWith(StatusCode code, int* reached) {
  KILN_RETURN_IF_ERROR(Status(code, "first"));
  ++*reached;
  return Status(StatusCode::kInternal, "second");
}

TEST(StatusTest, ReturnIfErrorStopsAtTheFirstFailure) {
  int reached = 0;
  Status s = failsWith(StatusCode::kPoisoned, &reached);
  EXPECT_EQ(s.code(), StatusCode::kPoisoned);
  EXPECT_EQ(s.message(), "first");
  EXPECT_EQ(reached, 0);
  s = failsWith(StatusCode::kOk, &reached);
  EXPECT_EQ(s.message(), "second");
  EXPECT_EQ(reached, 1);
}

}  // namespace

// How the runtime reaches the driver: libcuda missing, symbol resolution through
// cuGetProcAddress at the 12.0 ABI and through dlsym (cuModuleLoadDataEx, PTX's load, included),
// cuInit once, and the one error format of failed driver calls.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <string>

#include "fake_driver.h"
#include "kiln/runtime.h"
#include "kiln/testing/driver.h"

namespace {

using kiln::StatusCode;

void* address(auto fn) {
  return reinterpret_cast<void*>(fn);
}

class DriverLibraryTest : public ::testing::Test {
 protected:
  void TearDown() override { kiln::testing::setDriverLibrary(""); }
};

TEST_F(DriverLibraryTest, MissingLibraryIsDriverUnavailableWithDlerror) {
  kiln::testing::setDriverLibrary("libkiln_no_such_driver.so.1");
  kiln::DeviceInfo info;
  kiln::Status status = kiln::deviceForStream(nullptr, &info);
  EXPECT_EQ(status.code(), StatusCode::kDriverUnavailable);
  EXPECT_NE(status.message().find("cannot load libkiln_no_such_driver.so.1"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("cannot open shared object file"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("is the NVIDIA driver installed?"), std::string::npos);
  // The failure is remembered: every later entry point reports it, without retrying dlopen.
  kiln::fake::TestVariant v("rmsnorm_h4096_bf16", {"kernel_main"}, {kiln::fake::image(90)});
  kiln::Status again = kiln::preload(v.get(), nullptr);
  EXPECT_EQ(again.code(), StatusCode::kDriverUnavailable);
  EXPECT_EQ(again.message(), status.message());
}

TEST_F(DriverLibraryTest, RealLibcudaOnThisMachine) {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);
    GTEST_SKIP() << "libcuda.so.1 is installed here; this checks the GPU-less case";
  }
  kiln::testing::setDriverLibrary("");
  kiln::DeviceInfo info;
  kiln::Status status = kiln::deviceForStream(nullptr, &info);
  EXPECT_EQ(status.code(), StatusCode::kDriverUnavailable) << status.toString();
  EXPECT_NE(status.message().find("libcuda.so.1"), std::string::npos) << status.message();
}

TEST_F(DriverLibraryTest, GetProcAddressResolvesTheTwelveZeroAbi) {
  kiln::testing::setDriverLibrary(KILN_FAKE_LIBCUDA_PROC);
  const kiln::DriverApi* api = nullptr;
  ASSERT_TRUE(kiln::testing::activeDriver(&api).ok());
  void* lib = dlopen(KILN_FAKE_LIBCUDA_PROC, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  // Versioned where cuda.h maps the base name; not the later ABIs with other signatures.
  EXPECT_EQ(address(api->ctxPushCurrent), dlsym(lib, "cuCtxPushCurrent_v2"));
  EXPECT_EQ(address(api->ctxPopCurrent), dlsym(lib, "cuCtxPopCurrent_v2"));
  EXPECT_EQ(address(api->devicePrimaryCtxRelease), dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
  EXPECT_EQ(address(api->streamGetCtx), dlsym(lib, "cuStreamGetCtx"));
  EXPECT_EQ(address(api->ctxGetDevice), dlsym(lib, "cuCtxGetDevice"));
  EXPECT_EQ(address(api->launchKernel), dlsym(lib, "cuLaunchKernel"));
  EXPECT_EQ(address(api->launchKernelEx), dlsym(lib, "cuLaunchKernelEx"));
  EXPECT_EQ(address(api->moduleGetFunction), dlsym(lib, "cuModuleGetFunction"));
  EXPECT_EQ(address(api->tensorMapEncodeTiled), dlsym(lib, "cuTensorMapEncodeTiled"));
  ASSERT_NE(api->moduleLoadDataEx, nullptr);
  EXPECT_EQ(address(api->moduleLoadDataEx), dlsym(lib, "cuModuleLoadDataEx"));

  auto log = reinterpret_cast<const char* (*)()>(dlsym(lib, "kiln_fake_log"));
  auto inits = reinterpret_cast<int (*)()>(dlsym(lib, "kiln_fake_inits"));
  ASSERT_NE(log, nullptr);
  const std::string requests = log();
  EXPECT_NE(requests.find("cuStreamGetCtx@12000/1;"), std::string::npos) << requests;
  EXPECT_NE(requests.find("cuCtxPushCurrent@12000/1;"), std::string::npos) << requests;
  EXPECT_NE(requests.find("cuModuleGetFunction@12000/1;"), std::string::npos) << requests;
  EXPECT_NE(requests.find("cuTensorMapEncodeTiled@12000/1;"), std::string::npos) << requests;
  EXPECT_NE(requests.find("cuModuleLoadDataEx@12000/1;"), std::string::npos) << requests;
  EXPECT_EQ(requests.find("@13000"), std::string::npos) << requests;
  EXPECT_EQ(inits(), 1);
  // Once per process: a second request neither reloads nor re-inits.
  const kiln::DriverApi* again = nullptr;
  ASSERT_TRUE(kiln::testing::activeDriver(&again).ok());
  EXPECT_EQ(again, api);
  EXPECT_EQ(inits(), 1);
  dlclose(lib);
}

TEST_F(DriverLibraryTest, WithoutGetProcAddressFallsBackToVersionedSymbols) {
  kiln::testing::setDriverLibrary(KILN_FAKE_LIBCUDA_DLSYM);
  const kiln::DriverApi* api = nullptr;
  kiln::Status status = kiln::testing::activeDriver(&api);
  ASSERT_TRUE(status.ok()) << status.toString();
  void* lib = dlopen(KILN_FAKE_LIBCUDA_DLSYM, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  EXPECT_EQ(dlsym(lib, "cuGetProcAddress_v2"), nullptr);
  EXPECT_EQ(address(api->ctxPushCurrent), dlsym(lib, "cuCtxPushCurrent_v2"));
  EXPECT_EQ(address(api->ctxPopCurrent), dlsym(lib, "cuCtxPopCurrent_v2"));
  EXPECT_EQ(address(api->devicePrimaryCtxRelease), dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
  EXPECT_EQ(address(api->streamGetCtx), dlsym(lib, "cuStreamGetCtx"));
  EXPECT_EQ(address(api->getErrorString), dlsym(lib, "cuGetErrorString"));
  EXPECT_EQ(address(api->tensorMapEncodeTiled), dlsym(lib, "cuTensorMapEncodeTiled"));
  EXPECT_EQ(address(api->moduleLoadDataEx), dlsym(lib, "cuModuleLoadDataEx"));
  EXPECT_EQ(address(api->launchKernelEx), dlsym(lib, "cuLaunchKernelEx"));
  dlclose(lib);
}

TEST(DriverErrorTest, FailedLaunchNamesCallResultAndPlace) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.launch_result = CUDA_ERROR_LAUNCH_FAILED;
  kiln::fake::TestVariant v("rmsnorm_h4096_bf16", {"kernel_main"}, {kiln::fake::image(90)});
  kiln::LaunchConfig config;
  config.grid = {4, 1, 1};
  config.block = {256, 1, 1};
  kiln::Status status = kiln::launch(v.get(), 0, config, driver.makeStream(0), nullptr);
  ASSERT_EQ(status.code(), StatusCode::kDriverError);
  const std::string& m = status.message();
  EXPECT_EQ(m.rfind("rmsnorm_h4096_bf16 entry kernel_main (grid (4, 1, 1), block (256, 1, 1)", 0),
            0u)
      << m;
  EXPECT_NE(m.find("api.launchKernel(function,"), std::string::npos) << m;
  EXPECT_NE(m.find("CUDA_ERROR_LAUNCH_FAILED (719)"), std::string::npos) << m;
  EXPECT_NE(m.find("unspecified launch failure"), std::string::npos) << m;
  EXPECT_NE(m.find("launch.cpp:"), std::string::npos) << m;
}

TEST(DriverErrorTest, FailedInitIsReportedAndRemembered) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.init_result = CUDA_ERROR_NO_DEVICE;
  kiln::DeviceInfo info;
  kiln::Status first = kiln::deviceForStream(driver.makeStream(0), &info);
  EXPECT_EQ(first.code(), StatusCode::kDriverError);
  EXPECT_NE(first.message().find("api.init(0) failed: CUDA_ERROR_NO_DEVICE (100)"),
            std::string::npos)
      << first.message();
  kiln::Status second = kiln::deviceForStream(driver.makeStream(0), &info);
  EXPECT_EQ(second.message(), first.message());
  EXPECT_EQ(driver.inits.load(), 1);
}

TEST(DriverErrorTest, UnknownResultStillNamesTheNumber) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.launch_result = CUDA_ERROR_ILLEGAL_ADDRESS;  // not in the fake's name table;
  kiln::fake::TestVariant v("v", {"kernel_main"}, {kiln::fake::image(90)});
  kiln::Status status = kiln::launch(v.get(), 0, {}, driver.makeStream(0), nullptr);
  ASSERT_EQ(status.code(), StatusCode::kDriverError);
  EXPECT_NE(status.message().find("unrecognized CUresult (700)"), std::string::npos)
      << status.message();
}

}  // namespace

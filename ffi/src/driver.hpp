// driver.hpp — driver-API entry points, looked up at run time through the runtime's
// cudaGetDriverEntryPointByVersion so that libweft.so links libcudart only and still loads on a
// machine with no driver. Each accessor throws WEFT_E_UNSUPPORTED when the symbol is missing.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

namespace weft::driver {

PFN_cuTensorMapEncodeTiled_v12000 tensorMapEncodeTiled();
PFN_cuStreamWriteValue64_v11070 streamWriteValue64();
PFN_cuStreamWaitValue64_v11070 streamWaitValue64();
PFN_cuDriverGetVersion_v2020 driverGetVersion();
PFN_cuLaunchKernel_v4000 launchKernel();

}  // namespace weft::driver

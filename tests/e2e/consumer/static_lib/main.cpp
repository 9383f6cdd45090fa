// Links only `engine`; libkiln.a and its system libraries arrive through engine's link interface.
#include <cstdio>
#include <string>

std::string engineDescription();

int main() {
  std::printf("engine: %s\n", engineDescription().c_str());
  return 0;
}

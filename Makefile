# pvread: top-level build.
#   make          pvread.ko, libpvread and tools, the selftests
#   make demo     boot Xen, load the module, compare syscall and pvread
#   make check    every test, on the test machines (installs what it needs)
KSFT_DIR ?= $(CURDIR)/build/ksft
PAYLOAD := build/payload

all: kmod user selftests

kmod:
	$(MAKE) -C kmod W1

user:
	$(MAKE) -C user

KSFT_TREE := $(KSFT_DIR)/tree/tools/testing/selftests

$(KSFT_TREE)/run_kselftest.sh:
	selftests/get-kselftest-headers $(KSFT_DIR)

selftests: user $(KSFT_TREE)/run_kselftest.sh
	$(MAKE) -C selftests/pvread KSFT_DIR=$(KSFT_DIR) OUTPUT=$(CURDIR)/build/selftests

# What the test machines get in /opt/pvread.
# pvread_test_cs.ko: a second clocksource for the clocksource-switch tests.
# kselftest/: the suite as a kernel tree installs it (make -C
# tools/testing/selftests TARGETS=pvread install, through the part of the
# 6.12 tree that get-kselftest-headers extracts): run_kselftest.sh -c pvread.
payload: all
	$(MAKE) -C selftests/pvread/test_cs
	rm -rf $(PAYLOAD) && mkdir -p $(PAYLOAD)/bin
	cp kmod/pvread.ko selftests/pvread/test_cs/pvread_test_cs.ko \
	   selftests/pvread/*.sh $(PAYLOAD)/
	cp user/build/pvread-status user/build/pvread-bench \
	   user/build/test/timeloop $(PAYLOAD)/bin/
	mkdir -p $(PAYLOAD)/lib && cp user/build/libpvread-preload.so $(PAYLOAD)/lib/
	rm -rf $(KSFT_TREE)/pvread && cp -r selftests/pvread $(KSFT_TREE)/pvread
	$(MAKE) -C $(KSFT_TREE) TARGETS=pvread PVREAD_ROOT=$(CURDIR) \
		KSFT_INSTALL_PATH=$(CURDIR)/$(PAYLOAD)/kselftest install
	# The test programs once, stripped, linked from bin/: the static
	# programs, which every machine's initramfs carries (22 MB -> 12 MB).
	for f in $(PAYLOAD)/kselftest/pvread/pvread_*; do \
		case $$f in *.sh) continue ;; esac; \
		strip "$$f" && ln -s "../kselftest/pvread/$${f##*/}" $(PAYLOAD)/bin/ || exit 1; \
	done

demo check:
	vm/$@

clean:
	$(MAKE) -C kmod clean
	$(MAKE) -C user clean
	rm -rf build

.PHONY: all kmod user selftests payload demo check clean

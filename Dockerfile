# ModelFleet images: one build stage, then one small runtime stage per binary.
#   docker build --target server   -t modelfleet/server:0.1.0   .
#   docker build --target router   -t modelfleet/router:0.1.0   .
#   docker build --target operator -t modelfleet/operator:0.1.0 .
#   docker build --target sync     -t modelfleet/sync:0.1.0     .
# Debian 12 throughout, like our development machines, so scripts/install-deps.sh is the one list of
# build dependencies. CUDA 13 + cuDNN 9 come from NVIDIA's Debian 12 repository and only the server
# image carries them. Each runtime stage installs exactly the Debian packages that provide the
# shared libraries its binary needs (`ldd`; tests/e2e/test_dockerfile.py checks the lists against
# the binaries built here), copies that one binary, and runs it as uid 10001 with the binary as
# ENTRYPOINT, so `docker run IMAGE --flag` and a pod's `args` both pass flags straight to it.

ARG DEBIAN=debian:bookworm
ARG DEBIAN_SLIM=debian:bookworm-slim
ARG CUDA_REPO=https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64

FROM ${DEBIAN} AS cuda-base
ARG CUDA_REPO
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates curl \
 && curl -fsSL -o /tmp/keyring.deb ${CUDA_REPO}/cuda-keyring_1.1-1_all.deb \
 && dpkg -i /tmp/keyring.deb && rm /tmp/keyring.deb && apt-get update -qq

FROM cuda-base AS build
RUN apt-get install -y -qq --no-install-recommends cuda-nvcc-13-0 cuda-cudart-dev-13-0 \
      libcublas-dev-13-0 libcudnn9-dev-cuda-13 \
 && ln -s /usr/local/cuda-13.0 /usr/local/cuda
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh
COPY . .
# The runtime stages copy from /build at the same paths as a developer's build/ tree.
RUN cmake -S . -B /build -G Ninja -DMODELFLEET_SANITIZED_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
      --target modelfleet-server modelfleet-router modelfleet-operator modelfleet-sync

# What every runtime image shares: slim Debian and the unprivileged user.
FROM ${DEBIAN_SLIM} AS runtime-base
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin modelfleet

# modelfleet-server: the TensorFlow Serving drop-in. CPU inference (oneDNN) everywhere; the CUDA
# runtime and cuDNN for GPU nodes (the driver's libcuda comes from the node through the NVIDIA
# container toolkit). libcublas-13-0 provides libcublasLt, which the runtime opens with dlopen.
FROM runtime-base AS server
# NVIDIA's repository is reached over HTTPS: the CAs first, then its key and source from cuda-base.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=cuda-base /usr/share/keyrings/ /usr/share/keyrings/
COPY --from=cuda-base /etc/apt/sources.list.d/ /etc/apt/sources.list.d/
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      cuda-cudart-13-0 libcublas-13-0 libcudnn9-cuda-13 \
      libssl3 zlib1g libsimdjson14 libdnnl2 libgomp1 ocl-icd-libopencl1 libonnx1 libprotobuf32 \
      libprometheus-cpp-core1.0 libyaml-cpp0.7 libstdc++6 libgcc-s1 \
 && rm -rf /var/lib/apt/lists/*
ENV LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
COPY --from=build /build/server/main/modelfleet-server /usr/local/bin/modelfleet-server
# TF Serving's image contract: the model is mounted at $MODEL_BASE_PATH/$MODEL_NAME; the binary
# reads both variables when --model_name / --model_base_path are not given, so
# `docker run -e MODEL_NAME=digits -v $PWD/digits:/models/digits IMAGE` works as with
# tensorflow/serving. The operator sets the container's args itself.
ENV MODEL_NAME=model MODEL_BASE_PATH=/models
# OpenMP threads spin 10,000 times between parallel regions instead of 300,000: as fast on a quiet
# node, and no collapse when other pods want the cores (docs/benchmarks.md, "OpenMP spinning").
ENV GOMP_SPINCOUNT=10000
EXPOSE 8500 8501
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/modelfleet-server"]
CMD ["--port=8500", "--rest_api_port=8501"]

# modelfleet-router: the L7 load balancer in front of a ModelDeployment's versions.
FROM runtime-base AS router
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      libssl3 zlib1g libprometheus-cpp-core1.0 libyaml-cpp0.7 libstdc++6 libgcc-s1 libjemalloc2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/router/modelfleet-router /usr/local/bin/modelfleet-router
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/modelfleet-router"]

# modelfleet-operator: reconciles ModelDeployments and TrainingJobs (helm/modelfleet runs it).
FROM runtime-base AS operator
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      libssl3 zlib1g libprometheus-cpp-core1.0 libyaml-cpp0.7 libstdc++6 libgcc-s1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/operator/modelfleet-operator /usr/local/bin/modelfleet-operator
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/modelfleet-operator"]

# modelfleet-sync: the serving pods' sidecar that fetches model versions (file, PVC, HTTP(S)).
# ca-certificates: it verifies https:// model stores against the system's CAs.
FROM runtime-base AS sync
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      ca-certificates libssl3 zlib1g libprometheus-cpp-core1.0 libyaml-cpp0.7 libstdc++6 libgcc-s1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/sync/modelfleet-sync /usr/local/bin/modelfleet-sync
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/modelfleet-sync"]

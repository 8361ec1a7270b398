# ModelFleet images: one build stage, a slim runtime stage per image.
#   docker build -t modelfleet/server:dev --target server .
# Both stages are Debian 12 like our development machines, so scripts/install-deps.sh is the one
# list of build dependencies; CUDA 13 + cuDNN 9 come from NVIDIA's Debian 12 repository.

ARG DEBIAN=debian:bookworm
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
RUN cmake -S . -B /build -G Ninja -DMODELFLEET_SANITIZED_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" \
 && mkdir -p /out/bin \
 && find /build -maxdepth 3 -type f -executable -name 'modelfleet-*' -exec cp {} /out/bin/ \;

FROM cuda-base AS runtime
RUN apt-get install -y -qq --no-install-recommends cuda-cudart-13-0 libcublas-13-0 libcublaslt-13-0 \
      libcudnn9-cuda-13 libgrpc++1.51 libprotobuf32 libyaml-cpp0.7 libprometheus-cpp-core1.0 \
      libonnx1 libdnnl2 libsimdjson14 libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin modelfleet
ENV LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib
USER 10001

FROM runtime AS server
COPY --from=build /out/bin/ /usr/local/bin/
ENV MODEL_NAME=model MODEL_BASE_PATH=/models
EXPOSE 8500 8501
# Same contract as tensorflow/serving: mount the model at /models/$MODEL_NAME.
ENTRYPOINT ["/bin/sh", "-c", "exec modelfleet-server --port=8500 --rest_api_port=8501 --model_name=\"$MODEL_NAME\" --model_base_path=\"$MODEL_BASE_PATH/$MODEL_NAME\" \"$@\"", "--"]

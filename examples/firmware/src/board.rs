//! The NUCLEO-F767ZI: clocks, the user LED and the internal temperature
//! sensor, and the [`Board`] the device tools use. Everything a port to
//! another board changes, except the Ethernet pins (in `main.rs`, next to
//! the PHY), lives here.

use core::cell::RefCell;

use embassy_stm32::Peri;
use embassy_stm32::adc::{Adc, SampleTime, Temperature};
use embassy_stm32::gpio::{Level, Output, Pin, Speed};
use embassy_stm32::peripherals::ADC1;
use embassy_stm32::rcc::{
    AHBPrescaler, APBPrescaler, Hse, HseMode, Pll, PllMul, PllPDiv, PllPreDiv, PllQDiv, PllSource,
    Sysclk, mux,
};
use embassy_stm32::time::Hertz;
use embassy_sync::blocking_mutex::Mutex;
use embassy_sync::blocking_mutex::raw::ThreadModeRawMutex;
use mcpwire_device_tools::Board;

/// 216 MHz from the 8 MHz clock that the on-board ST-LINK feeds to HSE
/// (bypass mode), 48 MHz on PLL Q for the RNG.
pub fn clocks() -> embassy_stm32::Config {
    let mut config = embassy_stm32::Config::default();
    let rcc = &mut config.rcc;
    rcc.hse = Some(Hse {
        freq: Hertz(8_000_000),
        mode: HseMode::Bypass,
    });
    rcc.pll_src = PllSource::HSE;
    rcc.pll = Some(Pll {
        prediv: PllPreDiv::DIV4,   // 2 MHz
        mul: PllMul::MUL216,       // 432 MHz
        divp: Some(PllPDiv::DIV2), // 216 MHz system clock
        divq: Some(PllQDiv::DIV9), // 48 MHz for the RNG
        divr: None,
    });
    rcc.sys = Sysclk::PLL1_P;
    rcc.ahb_pre = AHBPrescaler::DIV1;
    rcc.apb1_pre = APBPrescaler::DIV4; // 54 MHz
    rcc.apb2_pre = APBPrescaler::DIV2; // 108 MHz (the ADC divides it by 4)
    rcc.mux.clk48sel = mux::Clk48sel::PLL1_Q;
    config
}

/// The hardware behind the device tools: the output `toggle_output` drives
/// and the sensor `read_sensor` reads. The tools share it through `&self`
/// (handlers are tasks of one thread-mode executor, hence the thread-mode
/// mutexes: no interrupt is masked while the ADC converts).
pub struct Nucleo {
    led: Mutex<ThreadModeRawMutex, RefCell<Output<'static>>>,
    sensor: Mutex<ThreadModeRawMutex, RefCell<TemperatureSensor>>,
}

impl Nucleo {
    /// `led`: LD1, the green user LED (PB0); `adc`: ADC1, which reads the
    /// internal temperature sensor.
    pub fn new(led: Peri<'static, impl Pin>, adc: Peri<'static, ADC1>) -> Self {
        Self {
            led: Mutex::new(RefCell::new(Output::new(led, Level::Low, Speed::Low))),
            sensor: Mutex::new(RefCell::new(TemperatureSensor::new(adc))),
        }
    }
}

impl Board for Nucleo {
    fn temperature_millicelsius(&self) -> i32 {
        self.sensor.lock(|s| s.borrow_mut().read_millicelsius())
    }

    fn set_output(&self, on: bool) {
        self.led.lock(|l| l.borrow_mut().set_level(Level::from(on)));
    }

    fn output(&self) -> bool {
        self.led.lock(|l| l.borrow().is_set_high())
    }
}

/// The internal temperature sensor on ADC1 (channel 18 on the F7).
pub struct TemperatureSensor {
    adc: Adc<'static, ADC1>,
    channel: Temperature,
}

impl TemperatureSensor {
    pub fn new(adc: Peri<'static, ADC1>) -> Self {
        let adc = Adc::new(adc);
        let channel = adc.enable_temperature();
        Self { adc, channel }
    }

    /// The die temperature in milli-degrees Celsius, from the datasheet's
    /// typical curve (0.76 V at 25 °C, 2.5 mV/°C; VDDA = 3.3 V on the
    /// Nucleo): within a few degrees, uncalibrated. The sensor wants at
    /// least 10 µs of sampling: 480 ADC cycles at 27 MHz are 17.8 µs.
    pub fn read_millicelsius(&mut self) -> i32 {
        let raw = self
            .adc
            .blocking_read(&mut self.channel, SampleTime::CYCLES480);
        millicelsius(raw)
    }
}

/// A 12-bit reading of the sensor, in milli-degrees Celsius.
fn millicelsius(raw: u16) -> i32 {
    // 3.3 V full scale (in i64: 4095 × 3,300,000 is over i32::MAX).
    let microvolts = i64::from(raw) * 3_300_000 / 4095;
    // 2.5 mV/°C: 2.5 µV per milli-degree.
    let mc = (microvolts - 760_000) * 2 / 5 + 25_000;
    // -279,000 to +1,041,000 for 12 bits; within i32 for any u16.
    i32::try_from(mc).unwrap_or(i32::MAX)
}
